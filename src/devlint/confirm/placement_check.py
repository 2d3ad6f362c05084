"""The placement table (devlint.confirm.placement) checked entry by entry: on the stand-in
device through the confirm child's recorders, and, where a GPU is present, on CUDA; one printed
row each. `python -m devlint.confirm.placement_check`."""
from __future__ import annotations

import torch

from devlint.confirm import recorders
from devlint.confirm.placement import TABLE, cuda_verdict, stand_in_verdict


def report(rows_out=print) -> list[dict]:
    """Every entry on the stand-in and, where a GPU is present, on CUDA; one printed row each."""
    on_cuda = torch.cuda.is_available()
    rows = []
    for entry in TABLE:
        row = {"entry": entry.name, "table": entry.verdict}
        row["stand_in"], row["stand_in_message"] = stand_in_verdict(entry, recorders)
        if on_cuda:
            row["cuda"], row["cuda_message"] = cuda_verdict(entry)
        rows.append(row)
        cells = [entry.name[:58].ljust(58), entry.verdict.ljust(8), row["stand_in"].ljust(8)]
        if on_cuda:
            cells += [row["cuda"].ljust(8), row["cuda_message"][:100]]
        rows_out("  ".join(cells))
    return rows


if __name__ == "__main__":
    header = ["entry".ljust(58), "table".ljust(8), "stand-in".ljust(8)]
    if torch.cuda.is_available():
        header += ["cuda".ljust(8), "CUDA's message"]
    else:
        header += ["(no GPU: CUDA not run)"]
    print("  ".join(header))
    report()
