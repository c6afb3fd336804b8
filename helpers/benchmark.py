"""Run notebook 06 headlessly and print its ratio table: ``python -m helpers.benchmark [--scale S] [--table-only]``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from helpers.measure.side_by_side import (
    NOTEBOOK,
    RESULTS_FILE,
    load_results,
    ratio_table,
    targets_text,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.benchmark", description=__doc__)
    parser.add_argument(
        "--table-only", action="store_true", help="do not run the notebook; print the existing file"
    )
    parser.add_argument(
        "--scale", type=float, help="ONNX_PDF_BENCH_SCALE for this run (default: 1.0 or the env)"
    )
    parser.add_argument(
        "--results", type=Path, help=f"results file (default: artifacts/{RESULTS_FILE})"
    )
    args = parser.parse_args(argv)
    if args.scale is not None:
        if not args.scale > 0:
            parser.error(f"--scale must be positive, got {args.scale}")
        os.environ["ONNX_PDF_BENCH_SCALE"] = str(args.scale)  # the notebook's kernel inherits it
    if not args.table_only:
        from helpers.pipeline.artifacts import run_notebook

        run_notebook(NOTEBOOK)
    results = load_results(args.results)
    cpu = results["machine"]["cpu"]
    print(
        f"CPU: {cpu['model']}, flags: {' '.join(cpu['flags'])}; threads: {results['machine']['threads']}\n"
    )
    print(ratio_table(results), end="\n\n")
    print(targets_text(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
