"""How the benchmarks print: rich tables on a terminal or at a fixed width, and markdown for docs/."""
from __future__ import annotations

import sys

from bench.machine import machine_line


def console(width: int):
    """A rich console: the terminal's width, or `width` columns when the output is not a terminal."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=width)


def print_machine(out, m: dict, suffix: str = "") -> None:
    """The machine line and, when measured, how much of it other processes took meanwhile."""
    out.print(machine_line(m) + suffix)
    if m.get("other_processes_share") is not None:
        share = m["other_processes_share"]
        note = " [red]- the machine was busy: numbers are unreliable[/]" if share > 0.05 else ""
        out.print(f"During the run other processes used {share:.1%} of all cores, hypervisor steal "
                  f"{m['steal_share']:.1%}{note}")


def verdict(ok: bool) -> str:
    return "[green]PASS[/]" if ok else "[red]MISS[/]"


def new_table(title: str, columns: list[tuple[str, str]]):
    """A rich table with these (name, justify) columns."""
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for name, justify in columns:
        table.add_column(name, justify=justify)
    return table


def markdown_table(header: list[str], rows: list[list[str]], left: int = 0) -> str:
    """A Markdown table whose columns are as wide as their widest cell: the first `left` columns
    aligned left, the others right."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if i < left else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])
