from frontier import experiments as ex


def test_run_reuses_a_matching_finished_run_and_retrains_a_stale_one(tmp_path, smoke_data):
    logs = []
    a = ex.run("baseline", "smoke", seed=0, root=tmp_path, steps=3, data=smoke_data, device="cpu", log=logs.append)
    b = ex.run("baseline", "smoke", seed=0, root=tmp_path, steps=3, data=smoke_data, device="cpu", log=logs.append)
    assert a["val_bpb"] == b["val_bpb"] and any("reusing" in m for m in logs)
    c = ex.run("baseline", "smoke", seed=0, root=tmp_path, steps=4, data=smoke_data, device="cpu", log=logs.append)
    assert c["steps"] == 4 and any("stale" in m for m in logs)
    sized = ex.run("baseline", "smoke", seed=0, root=tmp_path, steps=2, data=smoke_data, device="cpu",
                   label="size-1x64", sizes=dict(n_layer=1), log=logs.append)
    assert sized["config"]["model"]["n_layer"] == 1 and sized["run_dir"].endswith("size-1x64/s0")
