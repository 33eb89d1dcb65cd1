"""Two real gloo ranks on CPU (torch.multiprocessing spawn): FSDP2 `fully_shard` on a tiny Qwen2
with and without LoRA, the HF export gathered collectively and written by rank 0, and the
rollback verdict shared across ranks. One spawn serves every test here (module fixture)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the training subpackage needs torch")
pytest.importorskip("transformers", reason="the tiny causal LM and the reload need transformers")
pytest.importorskip("safetensors", reason="the HF export writes safetensors")

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from support.training import fsdp_worker, tiny_causal_lm, tiny_lora_lm, token_ids  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (dist.is_available() and dist.is_gloo_available()),
        reason="needs torch.distributed gloo",
    ),
]

WORLD_SIZE = 2


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("fsdp")
    mp.spawn(fsdp_worker, args=(WORLD_SIZE, str(out)), nprocs=WORLD_SIZE, join=True)
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD_SIZE)]
    return out, reports


def gathers(calls: list[list[Any]]) -> list[list[Any]]:
    return [call for call in calls if "all_gather" in call[0]]


@pytest.mark.parametrize("kind", ["lora", "dense"])
def test_every_rank_gathers_the_same_sequence_once_per_parameter(
    two_ranks: tuple[Path, list[dict[str, Any]]], kind: str
) -> None:
    _, reports = two_ranks
    first, second = (report[kind] for report in reports)
    assert first["calls"] == second["calls"]
    # Every state-dict entry is a sharded parameter (Qwen2's rotary buffer is not persistent);
    # LoRA adds A and B per wrapped module, each gathered exactly once.
    assert first["sharded_entries"] == len(tiny_lora_keys() if kind == "lora" else dense_keys())
    # One gather per entry, in state-dict order (each gathers this rank's shard).
    assert [shape for _, shape in gathers(first["calls"])] == first["local_shapes"]


def test_rank0_export_reloads_with_matching_outputs(
    two_ranks: tuple[Path, list[dict[str, Any]]],
) -> None:
    from transformers import AutoModelForCausalLM

    out, _ = two_ranks
    reloaded = AutoModelForCausalLM.from_pretrained(out / "lora").eval()
    assert set(reloaded.state_dict()) == dense_keys()
    with torch.no_grad():
        logits = reloaded(token_ids()).logits
    torch.testing.assert_close(logits, torch.load(out / "lora-logits.pt"))
    assert not torch.allclose(logits, torch.load(out / "dense-logits.pt"), atol=1e-3)


def test_sharded_dense_export_is_the_unsharded_state_dict(
    two_ranks: tuple[Path, list[dict[str, Any]]],
) -> None:
    out, _ = two_ranks
    exported = load_file(out / "dense" / "model.safetensors")
    state = tiny_causal_lm().state_dict()
    assert exported.keys() == state.keys()
    for key, value in state.items():
        assert torch.equal(exported[key], value), key


def test_a_spike_on_one_rank_rolls_back_every_rank(
    two_ranks: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, reports = two_ranks
    assert [report["rollbacks"] for report in reports] == [1, 1]


def dense_keys() -> set[str]:
    return set(tiny_causal_lm().state_dict())


def tiny_lora_keys() -> set[str]:
    return set(tiny_lora_lm().state_dict())
