"""Benchmark: the reference engine's `sft` workload on this CPU. Prints figures; not a test.

For each candidate of examples/sft-lora.yaml (params drawn by the engine's own search):

1  seconds per training step (five full-batch LoRA updates, in process, median of --runs);
2  seconds per candidate: the workload as the engine runs it, a fresh process (imports of
   torch and transformers, model, training, merged export, reload, scoring);
3  the rollback guard's overhead: the same training without `LossSpikeRollback`, and the
   difference as a share of the candidate;
4  the merged HF export's time as a share of the candidate.

Run: .venv/bin/python bench/sft.py [--runs N] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "mcp_server" / "reference_engine"
sys.path.insert(0, str(ENGINE / "src"))
os.environ["HF_HUB_OFFLINE"] = "1"

from automl_refengine.manifest import parse_manifest  # noqa: E402
from automl_refengine.search import trial_params  # noqa: E402
from automl_refengine.training.sft import TrialParams, run_trial  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

EXAMPLE = ENGINE / "examples" / "sft-lora.yaml"


def candidates() -> list[dict[str, object]]:
    manifest = parse_manifest(yaml.safe_load(EXAMPLE.read_text()), str(EXAMPLE))
    return [
        trial_params(manifest.search, i) or {} for i in range(manifest.search.budget.max_trials)
    ]


def process_seconds(params: dict[str, object], work: Path, steps: int) -> float:
    """One candidate as the engine launches it: `python -m automl_refengine.workloads.sft`."""
    params_file = work / "params.json"
    params_file.write_text(json.dumps(params))
    argv = [sys.executable, "-m", "automl_refengine.workloads.sft", "--params", str(params_file)]
    argv += ["--out", str(work / "metrics.json"), "--export", str(work / "export")]
    argv += ["--steps", str(steps)]
    env = {**os.environ, "PYTHONPATH": str(ENGINE / "src")}
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    hf_logging.disable_progress_bar()
    print(f"sft workload, {args.steps} steps, median of {args.runs} runs, torch threads 1")
    head = f"{'cand':>4} {'s/step':>8} {'s/cand':>7} {'guard s':>8} {'guard %':>8}"
    print(head + f" {'export s':>9} {'export %':>9} {'score':>6}")
    with tempfile.TemporaryDirectory(prefix="bench-sft-") as tmp:
        work = Path(tmp)
        for index, raw in enumerate(candidates()):
            params = TrialParams.from_json(raw)
            guarded, bare, process = [], [], []
            for run in range(args.runs):
                guarded.append(run_trial(params, work / f"g{run}", steps=args.steps))
                bare.append(run_trial(params, work / f"b{run}", steps=args.steps, rollback=False))
                process.append(process_seconds(raw, work, args.steps))
            train = statistics.median(r.seconds["train"] for r in guarded)
            train_bare = statistics.median(r.seconds["train"] for r in bare)
            export = statistics.median(r.seconds["export"] for r in guarded)
            candidate = statistics.median(process)
            guard = train - train_bare
            shares = (
                f"{100 * guard / candidate:>7.2f}% {export:>9.4f} {100 * export / candidate:>8.2f}%"
            )
            print(
                f"{index:>4} {train / args.steps:>8.4f} {candidate:>7.2f} {guard:>8.4f} {shares}"
                f" {guarded[0].score:>3}/{guarded[0].questions}"
            )


if __name__ == "__main__":
    main()
