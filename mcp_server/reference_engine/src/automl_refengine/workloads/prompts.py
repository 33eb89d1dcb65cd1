"""GEPA prompt optimisation, offline: a real `gepa.optimize` (gepa==0.1.2, extra `prompts`).

The task is arithmetic on one operator (`"17 % 5"`); the candidate is the system prompt. The
task model is a deterministic local function that can apply only the operators the prompt
explains, and the reflection model is a deterministic local function that reads GEPA's own
reflection prompt (the current instruction and the failed examples with their feedback) and
adds the explanation of one missing operator. No network, no paid calls.

Everything GEPA decides is deterministic (parent: the current best; minibatches: a fixed
rotation by iteration; no merges), so an optimisation resumed from GEPA's saved state ends
exactly where an uninterrupted one does. GEPA saves its state in `--run-dir` before every
iteration. The engine moves an interrupted trial's directory aside as `trial-NNNNN.prev-K`
and gives the next attempt a fresh one, so this workload first copies GEPA's state from the
newest earlier attempt that has one, and GEPA resumes from it. The metric is the best
candidate's validation score (`val_score`, maximize).
"""

from __future__ import annotations

import argparse
import json
import operator
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # gepa is the `prompts` extra: the engine's other modules import without it
    from gepa.core.data_loader import DataLoader
    from gepa.core.state import GEPAState

STATE_FILE = "gepa_state.bin"  # what GEPA itself reads back from run_dir to resume
SEED_PROMPT = "Answer with the result of the arithmetic expression, as a number."
DONT_KNOW = "I do not know."
OPERATORS: dict[str, tuple[str, Callable[[int, int], int]]] = {
    "+": ("the sum of a and b", operator.add),
    "-": ("a minus b", operator.sub),
    "*": ("the product of a and b", operator.mul),
    "%": ("the remainder of a divided by b", operator.mod),
    "//": ("a divided by b, rounded down", operator.floordiv),
    "^": ("a raised to the power b", operator.pow),
}
_RULE = re.compile(r'^- "a (\S+) b" is ', re.MULTILINE)
_EXAMPLE = re.compile(
    r"## Inputs\n(?P<input>.*?)\n\n## Generated Outputs\n.*?\n\n## Feedback\n(?P<feedback>.*?)\n",
    re.DOTALL,
)


def load_data() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The packaged train and validation sets, in GEPA's default adapter format."""
    raw = json.loads((resources.files(__package__) / "prompt_data.json").read_text("utf-8"))

    def shaped(items: list[dict[str, str]]) -> list[dict[str, Any]]:
        return [{"additional_context": {}, **item} for item in items]

    return shaped(raw["train"]), shaped(raw["val"])


def explained(instruction: str) -> set[str]:
    return set(_RULE.findall(instruction))


def rule(op: str) -> str:
    return f'- "a {op} b" is {OPERATORS[op][0]}.'


class TaskModel:
    """GEPA's task model: a chat-completion callable, slowed by `delay_s` per call so that a
    trial lasts long enough to be interrupted."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __call__(self, messages: Sequence[dict[str, str]]) -> str:
        time.sleep(self.delay_s)
        instruction, question = messages[0]["content"], messages[1]["content"]
        left, op, right = question.split()
        if op not in explained(instruction):
            return DONT_KNOW
        return str(OPERATORS[op][1](int(left), int(right)))


def reflection_model(prompt: str) -> str:
    """GEPA's reflection model: the current instruction plus the first operator that a failed
    example needed and the instruction does not explain yet."""
    instruction = prompt.split("```\n", 1)[1].split("\n```", 1)[0]
    known = explained(instruction)
    for match in _EXAMPLE.finditer(prompt):
        op = match["input"].split()[1]
        if "incorrect" in match["feedback"] and op in OPERATORS and op not in known:
            return f"```\n{instruction}\n{rule(op)}\n```"
    return f"```\n{instruction}\n```"


class RotatingBatches:
    """Minibatch i is the next `size` training ids in order: a pure function of GEPA's
    iteration counter, which GEPA saves with its state (its default sampler's random state
    is not saved)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def next_minibatch_ids(self, loader: DataLoader[Any, Any], state: GEPAState) -> list[Any]:
        ids = sorted(loader.all_ids())
        start = state.i * self.size
        return [ids[(start + k) % len(ids)] for k in range(self.size)]


def adopt_earlier_state(run_dir: Path) -> Path | None:
    """Copy GEPA's state from the newest earlier attempt of this trial into run_dir."""
    if (run_dir / STATE_FILE).exists():
        return None
    trial = run_dir.parent
    earlier = sorted(
        (int(m[1]), p / run_dir.name)
        for p in trial.parent.glob(f"{trial.name}.prev-*")
        if (m := re.fullmatch(rf"{re.escape(trial.name)}\.prev-(\d+)", p.name))
    )
    for _k, old in reversed(earlier):
        if (old / STATE_FILE).is_file():
            shutil.copytree(old, run_dir, dirs_exist_ok=True)
            return old
    return None


def optimise(params: dict[str, Any], run_dir: Path, delay_s: float) -> tuple[float, str]:
    """Run (or resume) GEPA; the best candidate's validation score and its prompt."""
    import gepa

    train, val = load_data()
    result = gepa.optimize(
        seed_candidate={"system_prompt": SEED_PROMPT},
        trainset=train,
        valset=val,
        task_lm=TaskModel(delay_s),
        reflection_lm=reflection_model,
        candidate_selection_strategy="current_best",
        batch_sampler=RotatingBatches(int(params["minibatch_size"])),
        max_metric_calls=int(params["max_metric_calls"]),
        run_dir=str(run_dir),
        seed=0,
    )
    best = result.best_idx
    return float(result.val_aggregate_scores[best]), str(result.candidates[best]["system_prompt"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m automl_refengine.workloads.prompts")
    parser.add_argument("--params", type=Path, required=True, help="params JSON file")
    parser.add_argument("--out", type=Path, required=True, help="metrics JSON file to write")
    parser.add_argument("--run-dir", type=Path, required=True, help="GEPA's run_dir")
    parser.add_argument("--call-delay", type=float, default=0.0, metavar="SECONDS")
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # GEPA's log, live
    params = json.loads(args.params.read_text())
    missing = {"minibatch_size", "max_metric_calls"} - set(params)
    if missing:
        print(f"prompts: missing params: {', '.join(sorted(missing))}", file=sys.stderr)
        return 2
    try:
        import gepa  # noqa: F401  (checked here, used by optimise)
    except ImportError as exc:
        print(f"prompts: the prompts extra is missing ({exc}); install automl-refengine[prompts]",
              file=sys.stderr)  # fmt: skip
        return 2
    adopted = adopt_earlier_state(args.run_dir)
    if adopted is not None:
        print(f"resuming GEPA from its state in {adopted}", flush=True)
    score, prompt = optimise(params, args.run_dir, args.call_delay)
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_text(json.dumps({"val_score": score}) + "\n")
    tmp.replace(args.out)
    print(f"best prompt:\n{prompt}\nval_score {score:.6g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
