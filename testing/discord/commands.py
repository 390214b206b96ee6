"""Application commands: registration checked as Discord checks it (failures are 400 Invalid Form
Body, 50035), and the data a user's ``/command`` carries, built from what the bot registered.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from .rest import ApiError, RecordedRequest, _err, _invalid_form

_CHAT_NAME = re.compile(r"^[-_'\w\u0900-\u097F\u0E00-\u0E7F]{1,32}$")


class Commands:
    """Command registration routes and the interaction data of a registered command."""

    def commands(self, guild_id: int | None = None) -> list[dict]:
        return self.guild_commands.get(guild_id, []) if guild_id is not None else self.global_commands

    def _find_command(self, name: str) -> tuple[dict | None, bool]:
        for cmd in self.guild_commands.get(self.guild_id, []):
            if cmd["name"] == name and cmd.get("type", 1) == 1:
                return cmd, True
        for cmd in self.global_commands:
            if cmd["name"] == name and cmd.get("type", 1) == 1:
                return cmd, False
        return None, False

    def _command_data(self, command: str, values: dict[str, Any], *, focused: str | None) -> dict:
        top, *path = command.split()
        cmd, is_guild = self._find_command(top)
        if cmd is None:
            known = sorted(c["name"] for c in [*self.guild_commands.get(self.guild_id, []), *self.global_commands])
            raise ValueError(f"/{top} is not registered with the fake (registered: {known}); "
                             "did the bot sync its command tree?")
        node, node_types = cmd, []
        for part in path:
            child = next((o for o in node.get("options") or [] if o["name"] == part and o["type"] in (1, 2)), None)
            if child is None:
                raise ValueError(f"/{top} has no subcommand (group) {part!r}")
            node_types.append(child["type"])
            node = child
        if any(o.get("type") in (1, 2) for o in node.get("options") or []):
            raise ValueError(f"/{command} is a group; name a subcommand")
        options = self._leaf_options(node.get("options") or [], values, focused)
        for part, kind in reversed(list(zip(path, node_types, strict=True))):
            options = [{"type": kind, "name": part, "options": options}]
        data: dict[str, Any] = {"id": cmd["id"], "name": top, "type": 1, "options": options}
        if is_guild:
            data["guild_id"] = str(self.guild_id)
        return data

    def _leaf_options(self, schema: list[dict], values: dict[str, Any], focused: str | None) -> list[dict]:
        by_name = {o["name"]: o for o in schema}
        unknown = [k for k in values if k not in by_name]
        if unknown:
            raise ValueError(f"unknown option(s) {unknown}; the command has {list(by_name)}")
        missing = [o["name"] for o in schema if o.get("required") and o["name"] not in values]
        if focused is None and missing:
            raise ValueError(f"missing required option(s) {missing}")
        out = []
        for spec in schema:
            name = spec["name"]
            if name not in values:
                continue
            option: dict[str, Any] = {"name": name, "type": spec["type"]}
            if name == focused:
                option.update(value=str(values[name]), focused=True)
            else:
                option["value"] = self._option_value(name, spec["type"], values[name], spec)
            out.append(option)
        return out

    @staticmethod
    def _option_value(name: str, kind: int, value: Any, spec: dict) -> Any:
        """A string or boolean option, the two kinds the Oracle's commands take; any other is refused
        so that a command given one is noticed here."""
        if kind == 3:
            if not isinstance(value, str):
                raise ValueError(f"option {name!r} is a string, got {value!r}")
            if (len(value) < spec.get("min_length", 0) or len(value) > spec.get("max_length", 6000)):
                raise ValueError(f"option {name!r}: length {len(value)} outside the allowed range")
        elif kind == 5:
            if not isinstance(value, bool):
                raise ValueError(f"option {name!r} is a boolean, got {value!r}")
        else:
            raise ValueError(f"option {name!r} of type {kind}: not served by this fake")
        if spec.get("choices") and value not in [c["value"] for c in spec["choices"]]:
            raise ValueError(f"option {name!r}: {value!r} is not one of the choices")
        return value

    def _check_commands(self, commands: Any) -> None:
        if not isinstance(commands, list):
            raise _invalid_form(_err("LIST_TYPE_CONVERT", "Only iterables may be used in a ListType"))
        errors: dict[str, Any] = {}
        seen: set[tuple[str, int]] = set()
        for index, cmd in enumerate(commands):
            e = self._check_command(cmd)
            key = (cmd.get("name"), cmd.get("type", 1))
            if key in seen:
                e.setdefault("name", _err("APPLICATION_COMMANDS_DUPLICATE_NAME",
                                          f"Application command names must be unique: {key[0]}"))
            seen.add(key)
            if e:
                errors[str(index)] = e
        if errors:
            raise _invalid_form(errors)

    def _check_command(self, cmd: dict) -> dict:
        e: dict[str, Any] = {}
        kind = cmd.get("type", 1)
        name = cmd.get("name") or ""
        if kind == 1:
            if not _CHAT_NAME.match(name) or name != name.lower():
                e["name"] = _err("APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
            desc = cmd.get("description") or ""
            if not 1 <= len(desc) <= 100:
                e["description"] = _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
            opt_errors = self._check_options(cmd.get("options") or [], depth=0)
            if opt_errors:
                e["options"] = opt_errors
        else:
            if not 1 <= len(name) <= 32:
                e["name"] = _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 32 in length.")
            if cmd.get("description"):
                e["description"] = _err("APPLICATION_COMMAND_CONTEXT_MENU_DESCRIPTION",
                                        "Context menu commands cannot have description")
        return e

    def _check_options(self, options: list[dict], depth: int) -> dict | list:
        if len(options) > 25:
            return _err("BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
        errors: dict[str, Any] = {}
        names: set[str] = set()
        optional_seen = False
        for index, opt in enumerate(options):
            e: dict[str, Any] = {}
            name = opt.get("name") or ""
            kind = opt.get("type")
            if not _CHAT_NAME.match(name) or name != name.lower():
                e["name"] = _err("APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
            if name in names:
                e["name"] = _err("APPLICATION_COMMAND_OPTIONS_NAME_ALREADY_EXISTS", "Option names must be unique")
            names.add(name)
            if not 1 <= len(opt.get("description") or "") <= 100:
                e["description"] = _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
            if kind in (1, 2):
                if (kind == 2 and depth > 0) or (kind == 1 and depth > 1):
                    e["type"] = _err("APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Subcommands nested too deeply")
                sub = self._check_options(opt.get("options") or [], depth + 1)
                if kind == 2 and any(o.get("type") != 1 for o in opt.get("options") or []):
                    e["options"] = _err("APPLICATION_COMMAND_OPTIONS_TYPE_INVALID",
                                        "Subcommand groups may only contain subcommands")
                elif sub:
                    e["options"] = sub
            else:
                if opt.get("required"):
                    if optional_seen:
                        e["required"] = _err("APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID",
                                             "Required options must be placed before non-required options")
                else:
                    optional_seen = True
                choices = opt.get("choices") or []
                if len(choices) > 25:
                    e["choices"] = _err("BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
                if choices and opt.get("autocomplete"):
                    e["autocomplete"] = _err("APPLICATION_COMMAND_AUTOCOMPLETE_INVALID",
                                             "Autocomplete cannot be set with choices")
                for ci, choice in enumerate(choices):
                    if not 1 <= len(str(choice.get("name") or "")) <= 100:
                        e.setdefault("choices", {})[str(ci)] = {
                            "name": _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")}
            if e:
                errors[str(index)] = e
        return errors

    def _command_object(self, spec: dict, command_id: int, guild_id: int | None) -> dict:
        cmd = copy.deepcopy(spec)
        cmd.update({"id": str(command_id), "application_id": str(self.app_id), "version": str(self._ids.next()),
                    "type": spec.get("type", 1)})
        cmd.setdefault("description", "")
        cmd.setdefault("default_member_permissions", None)
        cmd.setdefault("nsfw", False)
        cmd.setdefault("integration_types", [0])
        if guild_id is not None:
            cmd["guild_id"] = str(guild_id)
            cmd.setdefault("contexts", None)
        else:
            cmd.setdefault("dm_permission", True)
            cmd.setdefault("contexts", None)
        return cmd

    def _scope(self, application_id: str, guild_id: str | None) -> int | None:
        if application_id != str(self.app_id):
            raise ApiError(403, 50001, "Missing Access")
        if guild_id is None:
            return None
        if guild_id != str(self.guild_id):
            raise ApiError(403, 50001, "Missing Access")
        return int(guild_id)

    def _commands_list(self, scope: int | None) -> list[dict]:
        if scope is None:
            return self.global_commands
        return self.guild_commands.setdefault(scope, [])

    def _set_commands(self, scope: int | None, commands: list[dict]) -> None:
        if scope is None:
            self.global_commands = commands
        else:
            self.guild_commands[scope] = commands

    async def _r_put_commands(self, req: RecordedRequest, application_id: str,
                              guild_id: str | None = None) -> tuple[int, Any]:
        scope = self._scope(application_id, guild_id)
        self._check_commands(req.json)
        old = {(c["name"], c.get("type", 1)): c for c in self._commands_list(scope)}
        result = []
        for spec in req.json:
            prev = old.get((spec["name"], spec.get("type", 1)))
            result.append(self._command_object(spec, int(prev["id"]) if prev else self._ids.next(), scope))
        self._set_commands(scope, result)
        return 200, result
