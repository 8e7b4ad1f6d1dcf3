#!/usr/bin/python
"""Merge settings into an INI file in place (ranklog.stack.ini_settings)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ini_settings
short_description: Merge settings into an INI file, keeping everything else in it
description:
  - Sets C(key = value) in C([section]) for every given setting and leaves every other line of the
    file as it was (the operator's settings, comments, order).
  - A key that is present, active or commented out (C(;key = ...) or C(#key = ...)) in its section,
    is set on that line (the first active one if any); a missing key is added at the end of its
    section; a missing section is appended.
  - Used by ranklog.stack.grafana for grafana.ini, which the role must never overwrite whole.
version_added: "0.1.0"
author: ranklog
options:
  path:
    description: The INI file.
    type: path
    required: true
  settings:
    description: Mapping of section name to a mapping of key to value (values are written as text).
    type: dict
    required: true
  create:
    description: Create the file when it does not exist (otherwise fail).
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.files
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Merge ranklog's Grafana settings into grafana.ini
  ranklog.stack.ini_settings:
    path: /etc/grafana/grafana.ini
    settings:
      server: {http_addr: 10.0.0.5, http_port: 3000}
      analytics: {reporting_enabled: false}
    owner: root
    group: grafana
    mode: "0640"
"""

RETURN = r"""
changed_keys:
  description: The C(section.key) names whose line was set or added.
  returned: always
  type: list
  elements: str
"""

import os  # noqa: E402 - Ansible modules import after their documentation
import re  # noqa: E402
import tempfile  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*$")


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _key_line(line, key, commented):
    prefix = r"[;#]\s*" if commented else ""
    return re.match(rf"^\s*{prefix}{re.escape(key)}\s*=", line) is not None


def merge(lines, settings):
    """(new lines, changed keys): `lines` with every setting applied."""
    lines = list(lines)
    changed = []
    for section, values in settings.items():
        for key, value in values.items():
            wanted = f"{key} = {_text(value)}"
            start = next((i for i, line in enumerate(lines)
                          if (m := SECTION.match(line)) and m.group(1).strip() == section), None)
            if start is None:
                if lines and lines[-1].strip():
                    lines.append("")
                lines += [f"[{section}]", wanted]
                changed.append(f"{section}.{key}")
                continue
            end = next((i for i in range(start + 1, len(lines)) if SECTION.match(lines[i])), len(lines))
            body = range(start + 1, end)
            at = next((i for i in body if _key_line(lines[i], key, False)), None)
            if at is None:
                at = next((i for i in body if _key_line(lines[i], key, True)), None)
            if at is not None:
                if lines[at].strip() != wanted:
                    lines[at] = wanted
                    changed.append(f"{section}.{key}")
                continue
            last = max((i for i in body if lines[i].strip()), default=start)
            lines.insert(last + 1, wanted)
            changed.append(f"{section}.{key}")
    return lines, changed


def main():
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True},
                       "settings": {"type": "dict", "required": True},
                       "create": {"type": "bool", "default": True}},
        add_file_common_args=True, supports_check_mode=True)
    path = module.params["path"]
    exists = os.path.exists(path)
    if not exists and not module.params["create"]:
        module.fail_json(msg=f"{path} does not exist (create: false)")
    before = ""
    if exists:
        with open(path, encoding="utf-8") as handle:
            before = handle.read()
    lines, changed_keys = merge(before.splitlines(), module.params["settings"])
    after = "\n".join(lines) + "\n"
    changed = after != before
    if changed and not module.check_mode:
        directory = os.path.dirname(path) or "."
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ini_settings.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(after)
        module.atomic_move(tmp, path)
    file_args = module.load_file_common_arguments(module.params)
    if not module.check_mode or exists:
        changed = module.set_fs_attributes_if_different(file_args, changed)
    result = {"changed": changed, "changed_keys": changed_keys, "path": path}
    if module._diff:
        result["diff"] = {"before": before, "after": after, "before_header": path, "after_header": path}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
