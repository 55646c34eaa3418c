import torch

from frontier.optim.muon import newton_schulz
from frontier.optim.optimizers import lr_multiplier
from frontier.recipes import resolve
from frontier.train.trainer import build_model


def _model(**changes):
    cfg = resolve("baseline", "smoke")
    if changes:
        import dataclasses

        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, **changes))
    torch.manual_seed(0)
    return build_model(cfg), cfg


def test_forward_shapes_and_loss():
    model, cfg = _model()
    x = torch.randint(0, cfg.model.vocab_size, (2, 16))
    loss = model(x, x)
    assert loss.ndim == 0 and torch.isfinite(loss)
    per_token = model(x, x, reduction="none")
    assert per_token.shape == (2, 16)
    assert torch.allclose(per_token.mean(), loss)
    # blocks start as the identity and the head is tiny: the first loss is close to ln(V)
    assert abs(loss.item() - torch.log(torch.tensor(float(cfg.model.vocab_size))).item()) < 0.1


def test_causal():
    model, cfg = _model()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # leave the zero initialisation so attention matters
    x = torch.randint(0, cfg.model.vocab_size, (1, 24))
    y = x.clone()
    y[0, 12:] = (y[0, 12:] + 1) % cfg.model.vocab_size
    with torch.no_grad():
        a, b = model.logits(x), model.logits(y)
    assert torch.allclose(a[0, :12], b[0, :12], atol=1e-5)
    assert not torch.allclose(a[0, 12:], b[0, 12:], atol=1e-5)


def test_attention_gate_starts_open():
    plain, cfg = _model()
    with torch.no_grad():
        for p in plain.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # non-zero output projections, so attention reaches the logits
    gated, _ = _model(attn_gate=True)
    missing, unexpected = gated.load_state_dict(plain.state_dict(), strict=False)
    assert all(".gate." in k for k in missing) and not unexpected
    x = torch.randint(0, cfg.model.vocab_size, (2, 16))
    assert torch.allclose(plain.logits(x), gated.logits(x), atol=1e-6)
    gated(x, x).backward()
    assert all(b.attn.gate.weight.grad.abs().sum() > 0 for b in gated.blocks)
    with torch.no_grad():
        for b in gated.blocks:
            b.attn.gate.weight.fill_(1.0)
    assert not torch.allclose(plain.logits(x), gated.logits(x), atol=1e-4)


def test_softcap_bounds_logits():
    model, cfg = _model()
    with torch.no_grad():
        model.lm_head.weight.mul_(1e5)
    z = model.logits(torch.randint(0, cfg.model.vocab_size, (1, 8)))
    assert z.abs().max() <= cfg.model.logit_softcap


def test_newton_schulz_orthogonalises():
    torch.manual_seed(0)
    for shape in [(64, 32), (32, 64), (48, 48)]:
        g = torch.randn(*shape)
        s = torch.linalg.svdvals(newton_schulz(g, steps=5))
        assert s.min() > 0.5 and s.max() < 1.3, (shape, s.min(), s.max())


def test_muon_batches_by_shape_and_matches_one_matrix_at_a_time():
    from frontier.optim.muon import Muon

    torch.manual_seed(0)
    shapes = [(24, 8), (8, 24), (16, 16), (24, 8), (16, 16)]
    params = [torch.nn.Parameter(torch.randn(*s)) for s in shapes]
    grads = [torch.randn(*s) for s in shapes]
    start = [p.detach().clone() for p in params]
    opt = Muon(params, lr=0.1, momentum=0.9)
    for p, g in zip(params, grads):
        p.grad = g
    opt.step()
    for p, p0, g in zip(params, start, grads):
        buf = 0.1 * g  # zero buffer lerped towards g
        want = p0 - 0.1 * max(1.0, p.size(0) / p.size(1)) ** 0.5 * newton_schulz(g.lerp(buf, 0.9))
        assert torch.allclose(p.detach(), want, atol=1e-5), p.shape


def test_compiled_newton_schulz_matches_eager():
    from frontier.optim.muon import Muon

    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(24, 8)) for _ in range(3)]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    eager, comp = Muon(params, lr=0.1), Muon(twins, lr=0.1, compile_backend="inductor")
    for _ in range(3):
        for a, b in zip(params, twins):
            a.grad = torch.randn_like(a)
            b.grad = a.grad.clone()
        eager.step()
        comp.step()
    assert comp.orthogonalise is not newton_schulz
    for a, b in zip(params, twins):
        assert torch.allclose(a, b, atol=1e-4)


def test_a_field_added_later_keeps_old_hashes_at_its_default():
    import dataclasses

    cfg = resolve("compile", "smoke", clock="wall")  # the records before these fields ran under the wall clock
    from frontier.config import stable_hash

    old = cfg.to_dict()
    for later in ("compile_optimizer", "ema", "kernels", "clock", "probe", "probe_ref_s"):
        del old["train"][later]
    del old["optim"]["muon_momentum_warmup_frac"]  # a later field of the optimiser
    assert cfg.digest() == stable_hash(old)  # records made before the fields existed still match
    on = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, compile_optimizer=True))
    assert on.digest() != cfg.digest() and resolve("compile-opt", "smoke").digest() != cfg.digest()
    assert resolve("compile", "smoke", kernels="interpreter", clock="wall").digest() != cfg.digest()  # hashed
    assert resolve("compile", "smoke").digest() != cfg.digest()  # smoke's reference clock is hashed


def test_lr_schedule():
    assert lr_multiplier(0.0, 0.5, 0.0) == 1.0
    assert lr_multiplier(0.5, 0.5, 0.0) == 1.0
    assert abs(lr_multiplier(0.75, 0.5, 0.0) - 0.5) < 1e-12
    assert abs(lr_multiplier(1.0, 0.5, 0.1) - 0.1) < 1e-12
    assert abs(lr_multiplier(2.0, 0.5, 0.1) - 0.1) < 1e-12
