"""``roofline``: one command above the profiler and the operator.

``roofline profile`` (and every other subcommand of the profiler's parser) runs the profiler's
command line, ``roofline operator`` runs the Kubernetes operator, ``roofline export`` writes a
profile's plans as other tools' configuration (``export/``: it reads both a saved result and a
RooflineProfile's status). This package is the only place that imports both; the profiler never
imports the operator, nor the operator this package (import-linter contracts in
``pyproject.toml``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

PROG = "roofline"
OPERATOR_COMMAND = "operator"
OPERATOR_HELP = "run the Kubernetes operator (see roofline operator --help)"
EXPORT_COMMAND = "export"
EXPORT_HELP = "write a profile's plans as KEDA, Kueue, gateway, autoscaler or engine configuration"


def profiler_commands() -> dict[str, str]:
    """The profiler's subcommands with their one-line help, from its table of commands."""
    from roofline_profiler.cli.commands import COMMANDS

    return {name: command.help for name, command in COMMANDS.items()}


def version() -> str:
    """The installed distribution's version (the source tree's when run uninstalled)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as distribution_version

    try:
        return distribution_version("roofline-operator")
    except PackageNotFoundError:
        from roofline_operator import __version__

        return __version__


def usage(commands: dict[str, str]) -> str:
    names = "|".join(commands)
    width = max(len(name) for name in commands)
    lines = [
        f"usage: {PROG} [--version] {{{names}}} ...",
        "",
        "Measure each GPU's decode roofline and publish it to Kubernetes.",
        "",
        "commands:",
        *(f"  {name:<{width}}  {text}" for name, text in commands.items()),
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = arguments[0] if arguments else None
    if command == OPERATOR_COMMAND:
        from roofline_operator.run.cli import main as operator_main

        return operator_main(arguments[1:])
    if command == EXPORT_COMMAND:
        from roofline_cli.export.command import main as export_main

        return export_main(arguments[1:])
    commands = {
        **profiler_commands(),
        OPERATOR_COMMAND: OPERATOR_HELP,
        EXPORT_COMMAND: EXPORT_HELP,
    }
    if command in commands:
        from roofline_profiler.cli.commands import main as profiler_main

        return profiler_main(arguments)
    if command in ("-h", "--help"):
        sys.stdout.write(usage(commands))
        return 0
    if command in ("-V", "--version"):
        print(f"{PROG} {version()}")
        return 0
    what = f"unknown command {command!r}" if command else "a command is required"
    print(f"{PROG}: error: {what} (choose from {', '.join(commands)})", file=sys.stderr)
    return 2
