"""``--plot out.png``: algbw and busbw against size, log-log (matplotlib)."""
from __future__ import annotations

import json
from typing import Any

__all__ = ["plot_file", "MissingMatplotlib"]

FAMILY = {"host": "host backend", "nccl": "NCCL", "rccl": "RCCL"}


class MissingMatplotlib(RuntimeError):
    pass


def _version_text(code: int) -> str:
    if code < 10000:
        return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def plot_file(json_path: str, png_path: str) -> None:
    """Draw the results of a ``-J`` file into ``png_path``."""
    with open(json_path) as f:
        doc = json.load(f)
    plot(doc, png_path)


def plot(doc: dict[str, Any], png_path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingMatplotlib("--plot needs matplotlib: pip install matplotlib "
                                "(or pip install 'nccl4py[plot]')") from None
    results = doc["results"]
    # One line per collective and placement; type/op/root join the label when they vary.
    varying = [k for k in ("type", "redop", "root") if len({r[k] for r in results}) > 1]
    series: dict[str, list[tuple[int, float, float]]] = {}
    for r in results:
        for half, tag in (("out_of_place", "out-of-place"), ("in_place", "in-place")):
            h = r[half]
            if r["size"] <= 0 or h["alg_bw"] <= 0:
                continue  # nothing to draw on a log scale
            label = " ".join([r["collective"], *[str(r[k]) for k in varying], tag])
            series.setdefault(label, []).append((r["size"], h["alg_bw"], h["bus_bw"]))
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    for label, pts in series.items():
        pts.sort()
        xs = [p[0] for p in pts]
        style = "--" if label.endswith("in-place") and not label.endswith("out-of-place") else "-"
        axes[0].plot(xs, [p[1] for p in pts], style, marker="o", markersize=3, label=label)
        axes[1].plot(xs, [p[2] for p in pts], style, marker="o", markersize=3, label=label)
    for ax, what in zip(axes, ("algorithm bandwidth (algbw)", "bus bandwidth (busbw)")):
        if series:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(f"{what}, GB/s")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(what)
        if 0 < len(series) <= 16:
            ax.legend(fontsize=7)
    if len(series) > 16:
        fig.text(0.01, 0.01, f"{len(series)} series (legend omitted)", fontsize=8)
    lib = doc.get("library", {})
    fam = FAMILY.get(lib.get("family", ""), lib.get("family", "?"))
    fig.suptitle(f"nccl4py bench: {fam} {_version_text(int(lib.get('version_code', 0)))}, "
                 f"{doc.get('nranks')} ranks ({doc.get('array')} arrays)")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
