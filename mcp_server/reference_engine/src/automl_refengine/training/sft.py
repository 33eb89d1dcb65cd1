"""The `sft` workload's trial: LoRA SFT of a tiny causal LM on the packaged dataset, the merged
HF export, the export reloaded with transformers and scored on the held-out questions.

Nothing is downloaded: the model is a randomly initialised Qwen2 built from a config, the
tokenizer is character-level over a fixed alphabet, the data ships in `sft_data/`.

The task (why it was chosen is in docs/algorithms.md): a prompt is a string of 5 or 7 letters
`a`/`b` and a `?`; the answer is the letter in the majority, then end of sequence. 64 training
records, 16 held-out questions, disjoint, 8 answers `a` and 8 `b` among the held-out ones. The
random base scores 0/16. Five full-batch AdamW steps on the LoRA adapters at a learning rate
of 3e-3 to 1e-2 learn the rule (mostly 11 to 15 of 16); at 1e-4 nothing changes (0/16); from
2e-2 up the updates overshoot (mostly 0; at 1e-1 the rollback guard fires).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from torch import nn

from automl_refengine.training.export import ADAPTER_KEYS, HFExportCallback
from automl_refengine.training.lora import inject_lora
from automl_refengine.training.rollback import LossSpikeRollback
from automl_refengine.training.trainer import Trainer, TrainerCallback

PAD, EOS = 0, 1
ALPHABET = "?ab"
IGNORE = -100  # label of prompt and padding positions: not trained on
MAX_NEW_TOKENS = 4
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
LORA_TARGETS += ("lm_head",)
EXPORT_WEIGHTS = "model.safetensors"


@dataclass(frozen=True)
class Record:
    prompt: str
    answer: str


@dataclass(frozen=True)
class TrialParams:
    """One candidate: the search's parameters of a trial."""

    lr: float
    rank: int
    alpha: float
    rslora: bool

    @classmethod
    def from_json(cls, params: Mapping[str, object]) -> TrialParams:
        """The trial's params.json; a missing or mistyped value raises ValueError."""
        lr, rank, alpha, rslora = (params.get(k) for k in ("lr", "rank", "alpha", "rslora"))
        if not isinstance(lr, float | int) or isinstance(lr, bool) or lr <= 0:
            raise ValueError("lr must be a positive number")
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
            raise ValueError("rank must be a positive integer")
        if not isinstance(alpha, float | int) or isinstance(alpha, bool) or alpha <= 0:
            raise ValueError("alpha must be a positive number")
        if not isinstance(rslora, bool):
            raise ValueError("rslora must be true or false")
        return cls(float(lr), rank, float(alpha), rslora)


@dataclass
class TrialResult:
    score: int
    score_before: int
    questions: int
    steps: int
    rollbacks: int
    lr_scale: float
    losses: list[float]
    export_dir: Path
    export_sha256: str
    adapter_keys: int
    seconds: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        """The trial's metrics file: the score first (the search maximises it)."""
        return {
            "score": self.score,
            "score_before": self.score_before,
            "questions": self.questions,
            "steps": self.steps,
            "rollbacks": self.rollbacks,
            "lr_scale": self.lr_scale,
            "loss_first": self.losses[0],
            "loss_last": self.losses[-1],
            "loss_min": min(self.losses),
            "loss_curve": self.losses,
            "export_dir": str(self.export_dir),
            "export_sha256": self.export_sha256,
            "adapter_keys": self.adapter_keys,
            **{f"{name}_s": value for name, value in self.seconds.items()},
        }


def load_records(name: str) -> list[Record]:
    """`train` or `eval` from the packaged dataset."""
    text = (resources.files("automl_refengine.training") / "sft_data" / f"{name}.jsonl").read_text(
        encoding="utf-8"
    )
    return [Record(**json.loads(line)) for line in text.splitlines() if line.strip()]


def encode(text: str) -> list[int]:
    """Character-level ids: 0 is padding, 1 end of sequence, then the alphabet."""
    try:
        return [ALPHABET.index(char) + 2 for char in text]
    except ValueError:
        raise ValueError(f"{text!r} has a character outside the alphabet {ALPHABET!r}") from None


def base_model(seed: int) -> nn.Module:
    """The tiny causal LM every candidate starts from: the same seed gives the same weights."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=2 + len(ALPHABET),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        tie_word_embeddings=False,  # a tied LoRA base would make the merged export ambiguous
        pad_token_id=PAD,
        eos_token_id=EOS,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def training_batch(records: list[Record]) -> tuple[torch.Tensor, torch.Tensor]:
    """All records in one batch, right-padded; only the answer and its EOS carry labels."""
    rows = [(encode(r.prompt), [*encode(r.answer), EOS]) for r in records]
    width = max(len(p) + len(a) for p, a in rows)
    ids, labels = [], []
    for prompt, answer in rows:
        pad = width - len(prompt) - len(answer)
        ids.append(prompt + answer + [PAD] * pad)
        labels.append([IGNORE] * len(prompt) + answer + [IGNORE] * pad)
    return torch.tensor(ids), torch.tensor(labels)


@torch.no_grad()
def answer(model: nn.Module, prompt: str) -> list[int]:
    """Greedy decoding until EOS (included) or MAX_NEW_TOKENS."""
    ids = torch.tensor([encode(prompt)])
    out: list[int] = []
    for _ in range(MAX_NEW_TOKENS):
        token = int(model(input_ids=ids).logits[0, -1].argmax())
        out.append(token)
        if token == EOS:
            break
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    return out


def score(model: nn.Module, questions: list[Record]) -> int:
    """Exact answers: the greedy output must be the answer followed by EOS."""
    model.eval()
    return sum(answer(model, q.prompt) == [*encode(q.answer), EOS] for q in questions)


def guard() -> LossSpikeRollback:
    """Tuned for a five-step run: history from the second update, a snapshot after each."""
    return LossSpikeRollback(min_history=2, window=5, snapshot_every=1)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextmanager
def _deterministic() -> Iterator[None]:
    """One thread (the same reductions every run, and a fair share of a small machine) and
    deterministic kernels; the caller's settings come back afterwards."""
    threads, strict = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(strict)


def run_trial(
    params: TrialParams,
    export_dir: Path,
    *,
    steps: int,
    seed: int = 0,
    rollback: bool = True,
) -> TrialResult:
    """Train, export (merged), reload the export with transformers and score it; the same
    params and seed give the same result. `rollback` is for the benchmark's overhead figure;
    the workload always keeps the guard."""
    with _deterministic():
        return _run_trial(params, export_dir, steps, seed, rollback)


def _run_trial(
    params: TrialParams, export_dir: Path, steps: int, seed: int, rollback: bool
) -> TrialResult:
    from transformers import AutoModelForCausalLM

    seconds: dict[str, float] = {}
    started = time.perf_counter()
    train, questions = load_records("train"), load_records("eval")
    model = base_model(seed)
    score_before = score(model, questions)
    torch.manual_seed(seed + 1)  # the adapters' initialisation
    inject_lora(model, LORA_TARGETS, params.rank, params.alpha, params.rslora)
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=params.lr, weight_decay=0.0
    )
    spikes = guard()
    clock = _TrainEndClock()
    # The automatic export runs at the end of training, right after the clock notes the time.
    callbacks: list[TrainerCallback] = [clock, HFExportCallback(export_dir)]
    trainer = Trainer(model, optimizer, callbacks=[spikes, *callbacks] if rollback else callbacks)
    ids, labels = training_batch(train)
    losses: list[float] = []

    def loss_fn(m: nn.Module, _batch: int) -> torch.Tensor:
        loss = m(input_ids=ids, labels=labels).loss
        losses.append(round(float(loss.detach()), 6))
        return loss

    model.train()
    train_started = time.perf_counter()
    trainer.fit(range(steps), loss_fn)
    seconds["train"] = clock.at - train_started
    seconds["export"] = time.perf_counter() - clock.at
    reloaded = AutoModelForCausalLM.from_pretrained(export_dir)
    weights = export_dir / EXPORT_WEIGHTS
    final = score(reloaded, questions)
    seconds["total"] = time.perf_counter() - started
    return TrialResult(
        score=final,
        score_before=score_before,
        questions=len(questions),
        steps=steps,
        rollbacks=spikes.rollbacks,
        lr_scale=spikes.scale,
        losses=losses,
        export_dir=export_dir,
        export_sha256=sha256_file(weights),
        adapter_keys=_adapter_keys(weights),
        seconds={k: round(v, 6) for k, v in seconds.items()},
    )


class _TrainEndClock(TrainerCallback):
    """When training ended and the export began."""

    at = 0.0

    def on_train_end(self, model: nn.Module) -> None:
        self.at = time.perf_counter()


def _adapter_keys(weights: Path) -> int:
    """Adapter tensors in the exported file (a correct merged export has none)."""
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as handle:
        return sum(any(part in key for part in ADAPTER_KEYS) for key in handle.keys())  # noqa: SIM118
