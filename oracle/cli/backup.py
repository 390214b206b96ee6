"""`oracle backup` and `oracle restore`: the journals, the bot's threads and (--index) the indexes."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.markup import escape

from ..backup import backup, restore
from ..offload import off_loop
from .common import chosen, console, out


async def cmd_backup(args: argparse.Namespace) -> int:
    picked = chosen(args, overrides_apply=False)
    done = await off_loop(backup, picked.base, picked.campaigns, Path(args.to), index=args.index, keep=args.keep)
    if args.json:
        print(json.dumps({"folder": str(done.folder), "files": done.files}))
    else:
        out.print(f"backed up {len(done.files)} files into {escape(str(done.folder))}", soft_wrap=True)
    return 0


async def cmd_restore(args: argparse.Namespace) -> int:
    picked = chosen(args, overrides_apply=False)
    done = await off_loop(restore, picked.base, picked.campaigns, Path(args.backup))
    if args.json:
        print(json.dumps({"folder": str(done.folder), "files": done.files}))
    else:
        for path in done.files:
            console.print(f"restored {escape(path)}", soft_wrap=True)
        out.print(f"restored {len(done.files)} files from {escape(str(done.folder))}", soft_wrap=True)
    return 0
