"""Ansible callback `task_timings`: the wall time of every task, written as JSON for the test harness.

ansible.posix's profile_tasks is not installed here (ansible-core only), and the harness wants the
figures as data rather than screen output, so this records, like profile_tasks, the time from one
task's start to the next one's (with the linear strategy: the task across all hosts of the play) and
writes `[{"play": …, "task": …, "seconds": …}, …]` to $RANKLOG_TASK_TIMINGS when the run ends.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: task_timings
    type: aggregate
    short_description: write each task's wall time to the JSON file named by RANKLOG_TASK_TIMINGS
    description: Used by ranklog's container test harness to report where a playbook run spends its time.
    requirements: [enable in ansible.cfg or ANSIBLE_CALLBACKS_ENABLED]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_timings"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._play = ""
        self._rows: list[dict] = []
        self._current: dict | None = None

    def _close_current(self) -> None:
        if self._current is not None:
            self._current["seconds"] = round(time.monotonic() - self._current.pop("_start"), 2)
            self._rows.append(self._current)
            self._current = None

    def v2_playbook_on_play_start(self, play) -> None:
        self._close_current()
        self._play = play.get_name()

    def v2_playbook_on_task_start(self, task, is_conditional) -> None:
        self._close_current()
        self._current = {"play": self._play, "task": task.get_name(), "_start": time.monotonic()}

    def v2_playbook_on_handler_task_start(self, task) -> None:
        self.v2_playbook_on_task_start(task, False)

    def v2_playbook_on_stats(self, stats) -> None:
        self._close_current()
        path = os.environ.get("RANKLOG_TASK_TIMINGS")
        if path:
            with open(path, "w") as out:
                json.dump(self._rows, out, indent=1)
