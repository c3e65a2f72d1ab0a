# Records every task result and the play recap as JSON into the file named by
# NETTUNE_ANSIBLE_RECORD, beside the default (human) output, for the Go tests
# of test/ansible. ansible-core's own callbacks have no JSON one (that is in
# the ansible.posix collection, which is not installed).
from __future__ import annotations

import json
import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: nettune_record
    type: notification
    short_description: record task results and stats as JSON for nettune's tests
    description:
      - Writes plays, tasks, per-host results and the recap to $NETTUNE_ANSIBLE_RECORD.
    requirements:
      - enabled with ANSIBLE_CALLBACKS_ENABLED=nettune_record
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "nettune_record"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.plays = []

    def _task_start(self, task):
        if not self.plays:
            self.plays.append({"play": {"name": ""}, "tasks": []})
        self.plays[-1]["tasks"].append({"task": {"name": task.get_name()}, "hosts": {}})

    def v2_playbook_on_play_start(self, play):
        self.plays.append({"play": {"name": play.get_name()}, "tasks": []})

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._task_start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._task_start(task)

    def _record(self, result, **extra):
        if not self.plays or not self.plays[-1]["tasks"]:
            return
        res = getattr(result, "_result", None)
        if res is None:
            res = getattr(result, "result", {})
        entry = {k: res.get(k) for k in ("changed", "failed", "skipped", "msg", "stdout", "stderr", "rc") if k in res}
        entry.update(extra)
        self.plays[-1]["tasks"][-1]["hosts"][result._host.get_name()] = entry

    def v2_runner_on_ok(self, result):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, failed=True)

    def v2_runner_on_skipped(self, result):
        self._record(result, skipped=True)

    def v2_runner_on_unreachable(self, result):
        self._record(result, failed=True, unreachable=True)

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("NETTUNE_ANSIBLE_RECORD")
        if not path:
            return
        out = {
            "plays": self.plays,
            "stats": {h: stats.summarize(h) for h in sorted(stats.processed)},
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(out, f, default=str, indent=1)
