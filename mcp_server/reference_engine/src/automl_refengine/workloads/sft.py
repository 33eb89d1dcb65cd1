"""The `sft` workload: one trial of LoRA SFT on the packaged dataset, scored on its held-out
questions (see automl_refengine.training.sft).

    python -m automl_refengine.workloads.sft --params P --out M --export DIR [--steps 5]

Params: `lr`, `rank`, `alpha`, `rslora`. The metrics file (written atomically) holds `score`
(0..16), the loss curve and its summary, `rollbacks`, the export's directory and the sha256 of
its `model.safetensors`. Needs the `training` extra; this module itself imports only the
standard library, so the engine's other modules never pull torch in.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m automl_refengine.workloads.sft")
    parser.add_argument("--params", type=Path, required=True, help="params JSON file")
    parser.add_argument("--out", type=Path, required=True, help="metrics JSON file to write")
    parser.add_argument("--export", type=Path, required=True, help="merged HF export directory")
    parser.add_argument("--steps", type=int, default=5, help="LoRA updates (full batch)")
    parser.add_argument("--seed", type=int, default=0, help="base model and adapter init")
    args = parser.parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is ever downloaded
    try:
        from transformers.utils import logging as hf_logging

        from automl_refengine.training.sft import TrialParams, run_trial
    except ImportError as exc:
        print(
            f"sft: the training extra is missing ({exc}); install automl-refengine[training]"
            " into an environment that already has the torch build you want",
            file=sys.stderr,
        )
        return 2
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        params = TrialParams.from_json(json.loads(args.params.read_text(encoding="utf-8")))
    except ValueError as exc:
        print(f"sft: bad params: {exc}", file=sys.stderr)
        return 2
    print(f"params {params}", flush=True)
    result = run_trial(params, args.export, steps=args.steps, seed=args.seed)
    metrics = result.metrics()
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_text(json.dumps(metrics, indent=1) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(
        f"score {result.score}/{result.questions} (before {result.score_before}), losses"
        f" {result.losses}, rollbacks {result.rollbacks}, export sha256 {result.export_sha256}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
