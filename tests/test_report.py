

def test_every_bpb_is_printed_with_its_steps():
    from frontier.study.report import bpb, bpb_group

    recs = [{"val_bpb": 1.7361, "steps": 400}, {"val_bpb": 1.7341, "steps": 400}]
    assert bpb(recs[0]) == "1.7361 (400 steps)"
    assert bpb_group(recs) == "1.7351 ± 0.0014 (2 seeds, 400 steps)"
    assert bpb_group([{"val_bpb": 1.7, "steps": 390}, {"val_bpb": 1.8, "steps": 410}]).endswith("(2 seeds, 390-410 steps)")


def test_a_chapter_shows_the_package_source_not_a_copy():
    from frontier.study.report import source_of
    from frontier.train.bpb import bits_per_byte

    block = source_of(bits_per_byte)
    assert block.startswith("```python\n# frontier.train.bpb.bits_per_byte\ndef bits_per_byte")
