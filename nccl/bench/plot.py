"""``--plot out.png`` and ``--plot-from results.json out.png``: bandwidth
against message size, log-log (matplotlib).

One collective: two panels, algbw and busbw.  Several: one panel per
collective (busbw, and algbw where it differs), so that eleven collectives
never share one legend.  Out-of-place lines are solid, in-place dashed;
when the type, op or root varies each combination gets its own colour and
marker.  Sizes are labelled like ``-b``/``-e`` take them (8, 1K, 64M, 1G).

Drawing stays quick with many panels: the layout is fixed (no
``tight_layout``, which renders the figure once more to measure it), titles
sit at a fixed height, the axes have major ticks only (every tick is a few
matplotlib objects to create and draw), and bandwidths are labelled as plain
numbers (no mathtext).
"""
from __future__ import annotations

import json
import math
from typing import IO, Any

from nccl._diagnostics import decode_version

from .progress import format_size

__all__ = ["plot_file", "plot", "figure", "load", "require_matplotlib", "MissingMatplotlib",
           "BadResults"]

FAMILY = {"host": "host backend", "nccl": "NCCL", "rccl": "RCCL"}
PLACEMENTS = (("out_of_place", "out-of-place", "-", "o"), ("in_place", "in-place", "--", "s"))
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p")
_INSTALL = "pip install matplotlib (or pip install 'nccl4py[plot]')"


class MissingMatplotlib(RuntimeError):
    pass


class BadResults(ValueError):
    """The file is not a ``python -m nccl.bench -J`` result."""


def require_matplotlib() -> Any:
    """``matplotlib.pyplot`` with the file-only Agg backend, or MissingMatplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise MissingMatplotlib(f"plotting needs matplotlib ({e}): {_INSTALL}") from None
    return plt


def load(json_path: str) -> dict[str, Any]:
    """A ``-J`` file, checked enough to plot it."""
    try:
        with open(json_path) as f:
            doc: dict[str, Any] = json.load(f)
    except OSError as e:
        raise BadResults(f"{json_path!r} cannot be read: {e.strerror}") from None
    except ValueError as e:
        raise BadResults(f"{json_path!r} is not JSON: {e}") from None
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, list) or not all(
            isinstance(r, dict) and {"collective", "size", "out_of_place", "in_place"} <= set(r)
            for r in results):
        raise BadResults(f"{json_path!r} is not a result file of python -m nccl.bench -J")
    return doc


def plot_file(json_path: str, png_path: str, note: IO[str] | None = None) -> None:
    """Draw the results of a ``-J`` file into ``png_path``."""
    plot(load(json_path), png_path, note)


def _series(results: list[dict[str, Any]]) -> dict[str, dict[tuple[str, ...], list[Any]]]:
    """{collective: {(variant...): [(size, half, algbw, busbw)]}} in first-seen order; a
    variant names the type, op and root where they vary within the collective."""
    per_coll: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        per_coll.setdefault(r["collective"], []).append(r)
    out: dict[str, dict[tuple[str, ...], list[Any]]] = {}
    for name, rows in per_coll.items():
        varying = [k for k in ("type", "redop", "root") if len({r[k] for r in rows}) > 1]
        for r in rows:
            variant = tuple(f"root={r[k]}" if k == "root" else str(r[k]) for k in varying)
            for half, *_ in PLACEMENTS:
                h = r[half]
                if r["size"] <= 0 or h["alg_bw"] <= 0:
                    continue  # nothing to draw on a log scale
                out.setdefault(name, {}).setdefault(variant, []).append(
                    (r["size"], half, h["alg_bw"], h["bus_bw"]))
    return out


def _size_axis(ax: Any) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: format_size(int(round(x)))))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_locator(NullLocator())
    # plain numbers (0.01, 1, 100): no mathtext to lay out for every label
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}"))
    ax.set_xlabel("message size (bytes)")


def _draw(ax: Any, series: dict[tuple[str, ...], list[Any]], metric: int) -> int:
    """Lines of one panel; *metric* 2 is algbw, 3 busbw.  Returns the line count."""
    lines = 0
    for i, (variant, pts) in enumerate(series.items()):
        colour = f"C{i % 10}"
        for half, tag, style, marker in PLACEMENTS:
            mine = sorted(p for p in pts if p[1] == half)
            if not mine:
                continue
            label = " ".join([*variant, tag])
            ax.plot([p[0] for p in mine], [p[metric] for p in mine], linestyle=style,
                    marker=_MARKERS[i % len(_MARKERS)] if len(series) > 1 else marker,
                    markersize=3, color=colour, label=label)
            lines += 1
    if lines:
        ax.set_yscale("log")
    return lines


def figure(doc: dict[str, Any]) -> Any:
    """The matplotlib Figure for a result document (see the module docstring)."""
    plt = require_matplotlib()
    per_coll = _series(doc["results"])
    names = list(per_coll)
    if len(names) <= 1:
        fig, axes = plt.subplots(1, 2, figsize=(12, 5), squeeze=False)
        panels = [(axes[0][0], names[0] if names else "", 2, "algorithm bandwidth (algbw)"),
                  (axes[0][1], names[0] if names else "", 3, "bus bandwidth (busbw)")]
    else:
        cols = min(3, len(names))
        rows = math.ceil(len(names) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), squeeze=False)
        flat = [a for row in axes for a in row]
        for extra in flat[len(names):]:
            extra.set_visible(False)
        panels = [(flat[i], name, 3, f"{name}: bus bandwidth") for i, name in enumerate(names)]
    for ax, name, metric, title in panels:
        n = _draw(ax, per_coll.get(name, {}), metric)
        _size_axis(ax)
        ax.set_ylabel("GB/s")
        ax.grid(True, alpha=0.3)
        ax.set_title(title, fontsize=10, y=1.0)  # a fixed place: no measuring
        if 0 < n <= 12:
            ax.legend(fontsize=7)
        elif n:
            ax.text(0.01, 0.01, f"{n} lines (legend omitted)", transform=ax.transAxes,
                    fontsize=7)
    lib = doc.get("library", {})
    fam = FAMILY.get(lib.get("family", ""), lib.get("family", "?"))
    version = decode_version(int(lib.get("version_code") or 0))
    fig.suptitle(f"nccl4py bench: {fam} {version}, {doc.get('nranks')} ranks "
                 f"({doc.get('array')} arrays)" + (f", {doc['hostname']}" if doc.get("hostname")
                                                   else ""))
    # Margins in inches, whatever the number of panels (see the module doc).
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=1.0 / width, right=1 - 0.2 / width, bottom=0.6 / height,
                        top=1 - 0.7 / height, wspace=0.3, hspace=0.45)
    return fig


def plot(doc: dict[str, Any], png_path: str, note: IO[str] | None = None) -> None:
    """Draw *doc* into *png_path*; *note*: where to say so first (a stream)."""
    if note is not None:
        panels = len({r["collective"] for r in doc["results"]})
        print(f"# drawing {panels} collective{'s' if panels != 1 else ''} into {png_path} ...",
              file=note, flush=True)
    plt = require_matplotlib()
    fig = figure(doc)
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
