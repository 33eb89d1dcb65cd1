"""LoRA/RSLoRA merge and the HF export, on real modules and real safetensors files; the HF
tests reload the export with transformers' AutoModelForCausalLM (nothing downloaded)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the training subpackage needs torch")
pytest.importorskip("safetensors", reason="the HF export writes safetensors")

from safetensors.torch import load_file  # noqa: E402
from support.training import tiny_causal_lm, tiny_lora_lm, token_ids  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (  # noqa: E402
    checkpoint_wrapper,
)

# isort: split
# training_helpers has put the engine source on sys.path.
from automl_refengine.training import (  # noqa: E402
    HFExportCallback,
    LoraInjectedLinear,
    Trainer,
    export_hf,
    merge_lora,
    merged_weight,
)

CONFIG = {"model_type": "test-only"}  # plain modules have no HF config of their own


def lora_linear(
    rslora: bool = False, base_dtype: torch.dtype = torch.float32, seed: int = 0
) -> LoraInjectedLinear:
    torch.manual_seed(seed)
    base = nn.Linear(8, 6).to(base_dtype)
    module = LoraInjectedLinear(base, r=4, alpha=8.0, rslora=rslora, adapter_dtype=torch.float32)
    with torch.no_grad():
        module.lora_B.normal_(std=0.5)
    return module


def reference_merge(module: LoraInjectedLinear) -> torch.Tensor:
    """W + scale * B @ A in float64, with the scale from the definition."""
    scale = module.alpha / (math.sqrt(module.r) if module.rslora else module.r)
    weight, a, b = (t.detach().double() for t in (module.base.weight, module.lora_A, module.lora_B))
    return weight + scale * b @ a


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.norm = nn.BatchNorm1d(8)  # buffers are part of the export too


def live_state(model: nn.Module) -> dict[str, tuple[int, torch.Tensor, bool]]:
    return {
        name: (id(p), p.detach().clone(), p.requires_grad) for name, p in model.named_parameters()
    }


@pytest.mark.parametrize("rslora", [False, True], ids=["lora", "rslora"])
def test_merged_weight_matches_the_reference(rslora: bool) -> None:
    module = lora_linear(rslora)
    assert module.scaling == (8.0 / 2.0 if rslora else 8.0 / 4.0)
    before = live_state(module)
    merged = merged_weight(module)
    torch.testing.assert_close(merged.double(), reference_merge(module))
    # The dense layer computes what the adapted one does.
    x = torch.randn(3, 8)
    torch.testing.assert_close(nn.functional.linear(x, merged, module.base.bias), module(x))
    assert {k: (i, r) for k, (i, _, r) in live_state(module).items()} == {
        k: (i, r) for k, (i, _, r) in before.items()
    }
    assert not module.base.weight.requires_grad and module.lora_A.requires_grad


def test_bf16_base_with_fp32_adapters() -> None:
    module = lora_linear(base_dtype=torch.bfloat16)
    merged = merged_weight(module)
    assert merged.dtype == torch.bfloat16
    expected = reference_merge(module).to(torch.bfloat16)
    torch.testing.assert_close(merged, expected)  # bf16 tolerances


def test_export_leaves_live_parameters_alone_and_repeats_identically(tmp_path: Path) -> None:
    model = nn.Sequential(Block(), Block())
    model[1].proj = lora_linear_for(model[1].proj)
    before = live_state(model)
    first = export_hf(model, tmp_path / "one", CONFIG)
    second = export_hf(model, tmp_path / "two", CONFIG)
    after = live_state(model)
    assert after.keys() == before.keys()
    for name, (ident, value, requires_grad) in before.items():
        assert after[name][0] == ident
        assert torch.equal(after[name][1], value)
        assert after[name][2] == requires_grad
    assert first is not None and second is not None
    assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()
    assert (first / "config.json").read_text() == (second / "config.json").read_text()

    exported = load_file(first / "model.safetensors")
    assert set(exported) == set(nn.Sequential(Block(), Block()).state_dict())
    torch.testing.assert_close(exported["1.proj.weight"], merged_weight(model[1].proj))
    assert torch.equal(exported["1.proj.bias"], model[1].proj.base.bias.detach())


def lora_linear_for(base: nn.Linear) -> LoraInjectedLinear:
    module = LoraInjectedLinear(base, r=2, alpha=4.0)
    with torch.no_grad():
        module.lora_B.fill_(0.25)
    return module


def test_dense_model_exports_its_state_dict_unchanged(tmp_path: Path) -> None:
    model = nn.Sequential(Block(), nn.Linear(8, 8, bias=False)).to(torch.float64)
    model[0].norm.running_mean.fill_(0.5)
    out = export_hf(model, tmp_path, CONFIG)
    assert out is not None
    exported = load_file(out / "model.safetensors")
    state = model.state_dict()
    assert exported.keys() == state.keys()
    for key, value in state.items():
        assert exported[key].dtype == value.dtype
        assert torch.equal(exported[key], value)


def test_wrapper_components_are_stripped(tmp_path: Path) -> None:
    model = nn.Sequential(Block())
    model[0].proj = checkpoint_wrapper(lora_linear_for(model[0].proj))
    # checkpoint_wrapper strips its component from state-dict keys, but not from module names.
    assert "0.proj._checkpoint_wrapped_module" in dict(model.named_modules())
    exported = load_file(export_hf(model, tmp_path, CONFIG) / "model.safetensors")
    assert set(exported) == set(nn.Sequential(Block()).state_dict())
    torch.testing.assert_close(exported["0.proj.weight"], merged_weight(model[0].proj))


def test_a_tied_lora_base_is_refused(tmp_path: Path) -> None:
    model = nn.Module()
    model.embed = nn.Embedding(16, 8)
    model.head = nn.Linear(8, 16, bias=False)
    model.head.weight = model.embed.weight
    model.head = lora_linear_for(model.head)
    with pytest.raises(ValueError, match=r"'head' has a tied base weight.*embed\.weight"):
        export_hf(model, tmp_path, CONFIG)
    assert not any(tmp_path.iterdir())


def test_a_normalised_key_collision_is_refused(tmp_path: Path) -> None:
    model = nn.Module()
    model.proj = lora_linear_for(nn.Linear(4, 4))
    model._orig_mod = nn.Module()  # a compiled copy left next to the original
    model._orig_mod.proj = nn.Linear(4, 4)
    with pytest.raises(ValueError, match=r"collide: .* both become 'proj\.(weight|bias)'"):
        export_hf(model, tmp_path, CONFIG)
    assert not any(tmp_path.iterdir())


def test_a_config_is_required(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs an HF config"):
        export_hf(nn.Linear(2, 2), tmp_path)


def test_merge_lora_in_place_keeps_the_function() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
    model[0] = lora_linear_for(model[0])
    model[2] = lora_linear_for(model[2])
    x = torch.randn(5, 8)
    expected, weight = model(x), merged_weight(model[2])
    merged = merge_lora(model)
    assert not any(isinstance(m, LoraInjectedLinear) for m in merged.modules())
    assert type(merged[2]) is nn.Linear
    torch.testing.assert_close(merged[2].weight, weight)
    torch.testing.assert_close(merged(x), expected)


def assert_reloads_like(out: Path, live: nn.Module) -> None:
    from transformers import AutoModelForCausalLM

    reloaded = AutoModelForCausalLM.from_pretrained(out).eval()
    assert not any("lora" in key or ".base." in key for key in reloaded.state_dict())
    assert set(reloaded.state_dict()) == set(tiny_causal_lm().state_dict())
    with torch.no_grad():
        torch.testing.assert_close(reloaded(token_ids()).logits, live(token_ids()).logits)


@pytest.mark.slow
@pytest.mark.parametrize("rslora", [False, True], ids=["lora", "rslora"])
def test_hf_reload_matches_the_adapted_model(tmp_path: Path, rslora: bool) -> None:
    pytest.importorskip("transformers", reason="the real HF reload needs transformers")
    model = tiny_lora_lm(rslora=rslora)
    with torch.no_grad():
        adapted, plain = model(token_ids()).logits, tiny_causal_lm()(token_ids()).logits
    assert not torch.allclose(adapted, plain, atol=1e-3)  # the adapters do change the outputs
    out = export_hf(model, tmp_path)
    assert out is not None and (out / "config.json").is_file()
    assert_reloads_like(out, model)


@pytest.mark.slow
def test_trainer_exports_automatically(tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason="the real HF reload needs transformers")
    model = tiny_lora_lm()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=0.1)
    trainer = Trainer(model, optimizer, callbacks=[HFExportCallback(tmp_path, every=2)])

    def loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        return model(ids, labels=ids).loss

    assert trainer.fit([token_ids(1), token_ids(2), token_ids(3)], loss) == 3
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["step-000002"]
    assert_reloads_like(tmp_path, model)  # the final export is the trained model
