"""Training building blocks of the reference engine: a minimal trainer loop, the loss-spike
rollback guard, LoRA/RSLoRA and the automatic HF export.

Needs the `training` extra (torch, transformers, safetensors); the rest of the engine never
imports this subpackage, so the base install stays pure Python.
"""

from automl_refengine.training.export import HFExportCallback, export_hf
from automl_refengine.training.lora import (
    LoraInjectedLinear,
    inject_lora,
    merge_lora,
    merged_weight,
)
from automl_refengine.training.rollback import LossSpikeError, LossSpikeRollback
from automl_refengine.training.trainer import Trainer, TrainerCallback

__all__ = [
    "HFExportCallback",
    "LoraInjectedLinear",
    "LossSpikeError",
    "LossSpikeRollback",
    "Trainer",
    "TrainerCallback",
    "export_hf",
    "inject_lora",
    "merge_lora",
    "merged_weight",
]
