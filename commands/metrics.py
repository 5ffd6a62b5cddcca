"""`kernelwright metrics --db PATH --format csv|parquet --out DIR`: the results store's runs,
candidates, current kernels, kernel versions and nightly history as one file each
(report/metrics.py), for a BI tool or a notebook to read."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import EXIT_OK, UserError, open_store


def cmd_metrics(args: argparse.Namespace) -> int:
    from ..report.metrics import tables, write_tables

    if not Path(args.db).is_file():
        raise UserError(f"no results store at {args.db}")
    if args.format == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise UserError(
                "--format parquet needs pyarrow: pip install 'kernelwright[metrics]' "
                "(or --format csv)"
            ) from None
    written = write_tables(tables(open_store(args.db)), args.out, args.format)
    for path, rows in written:
        print(f"{path}: {rows} row{'s' * (rows != 1)}")
    return EXIT_OK
