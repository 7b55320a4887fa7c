"""benchmarks/mutation_gpu.py (the CUDA half of a kept mutation copy, on a GPU machine): the mutants it finds and
its refusals, each one sentence with exit status 2."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mg():
    spec = importlib.util.spec_from_file_location("mutation_gpu", ROOT / "benchmarks" / "mutation_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_with(tmp_path: Path, text: str) -> Path:
    (tmp_path / "mutants" / "simcache").mkdir(parents=True)
    (tmp_path / "mutants" / "simcache" / "streams.py").write_text(text, encoding="utf-8")
    return tmp_path


def test_each_mutant_is_named_as_the_trampolines_read_it(mg, tmp_path):
    copy = copy_with(tmp_path, "def x_resolve_device__mutmut_orig(name):\n    pass\n"
                               "def x_resolve_device__mutmut_12(name):\n    pass\n"
                               "class CudaStreams:\n"
                               "    def xǁCudaStreamsǁwait__mutmut_1(self, stream, event):\n        pass\n"
                               "# def x_backend_for__mutmut_3(device): a comment, not a mutant\n")
    assert mg.mutant_names(copy / "mutants", "simcache/streams.py") == [
        "simcache.streams.x_resolve_device__mutmut_12", "simcache.streams.xǁCudaStreamsǁwait__mutmut_1"]


def test_a_missing_copy_and_bad_numbers_are_one_sentence_each(mg, tmp_path, capsys):
    assert mg.main([str(tmp_path)]) == 2
    assert capsys.readouterr() == ("", f"no mutmut copy of simcache/streams.py under {tmp_path / 'mutants'}; make "
                                       f"one with benchmarks/mutation.py simcache/streams.py --keep\n")
    copy = copy_with(tmp_path, "")
    for bad in (["--jobs", "0"], ["--budget", "-1"], ["--mutant-timeout", "-5"]):
        assert mg.main([str(copy), *bad]) == 2
        assert capsys.readouterr() == ("", "--jobs must be at least 1, and --mutant-timeout and --budget not "
                                           "negative\n")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_refuses_unless_asked_to_try_and_it_needs_mutmut(mg, tmp_path, capsys, monkeypatch):
    copy = copy_with(tmp_path, "")
    assert mg.main([str(copy)]) == 2
    assert capsys.readouterr() == ("", "this machine has no CUDA, so the mutants' CUDA code would not run; run this "
                                       "on a GPU machine (or pass --without-cuda to try the script)\n")
    monkeypatch.setattr(mg.importlib.util, "find_spec", lambda name: None)
    assert mg.main([str(copy), "--without-cuda"]) == 2
    assert capsys.readouterr() == ("", "mutmut is not importable here (its trampolines import it); pip install "
                                       "mutmut, or put a copy of its package on PYTHONPATH\n")
