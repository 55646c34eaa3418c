"""The study's pool of one-thread worker processes (frontier.study.workers)."""

import os

import pytest

from frontier.errors import UserError
from frontier.study.workers import one_thread_jobs


def _probe(job):
    import torch

    return job, os.getpid(), torch.get_num_threads()


def test_each_job_runs_once_in_a_fresh_one_thread_process():
    results = list(one_thread_jobs(_probe, ["a", "b", "c"], workers=2))
    assert sorted(job for job, _, _ in results) == ["a", "b", "c"]
    assert {threads for _, _, threads in results} == {1}
    pids = [pid for _, pid, _ in results]
    assert len(set(pids)) == 3 and os.getpid() not in pids  # never this process, never a process twice


def test_no_workers_is_one_clear_error():
    with pytest.raises(UserError, match="0 workers"):
        list(one_thread_jobs(_probe, ["a"], workers=0))
