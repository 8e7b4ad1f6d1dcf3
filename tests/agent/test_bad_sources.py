"""A bad source costs that source, never the agent: a typo'd format, options its parser refuses or an
unknown preset is one error line naming the key, the gauge ranklog_agent_source_errors{source} (the
alert RanklogAgentSourceInvalid watches it), and the other sources keep shipping — also once a file
matches the bad source's glob, which used to kill the agent with a 31-line traceback on every node."""

from __future__ import annotations

import subprocess
import time

from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.procs import ranklog_cmd


def test_bad_sources_are_skipped_and_the_others_ship(tmp_path, token_file):
    good, typo, refused = (tmp_path / name for name in ("good", "typo", "refused"))
    for folder in (good, typo, refused):
        folder.mkdir()
    config = tmp_path / "agent.yaml"
    config.write_text(f"sources: [{{glob: '{refused}/*.log', format: text, options: {{regex: 'no group'}}}}]\n")
    with running_archive(tmp_path / "archive", token_file) as archive, \
            running_agent([archive.url], token_file, tmp_path / "state",
                          sources=[f"{typo}/*.log:verl-consol", f"{good}/*.log:text"],
                          extra_args=["--preset", "slurm", "--config", str(config)]) as agent:
        (typo / "train.log").write_text("step:1 - loss:0.5\n")  # the file that used to crash the agent
        (refused / "train.log").write_text("step 1\n")
        (good / "train.log").write_text("line one\nline two\n")
        scrape = agent.wait_for(lambda m: m.value("ranklog_agent_records_shipped_total") >= 2, timeout=60,
                                what="the good source shipped")
        time.sleep(1.0)  # the bad sources' files have been seen by discovery more than once
        assert agent.proc.poll() is None
        assert {labels["source"] for labels in scrape.labels("ranklog_agent_source_errors")} == \
            {"source[0]", "sources[0]", "preset:slurm"}
        assert scrape.value("ranklog_agent_source_errors") == 3
        assert agent.scrape().value("ranklog_agent_records_shipped_total") == 2
        log = agent.log()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 3 and "Traceback" not in log
    assert any("source[0].format: unknown format 'verl-consol' (did you mean 'verl-console'?" in e for e in errors)
    assert any("sources[0].options: the text parser refuses them" in e for e in errors)
    assert any("preset: unknown preset 'slurm'" in e for e in errors)


def test_an_agent_with_no_valid_source_left_exits_2_naming_it(tmp_path, token_file):
    proc = subprocess.run(ranklog_cmd("agent", "--archive", "http://127.0.0.1:9", "--token-file", str(token_file),
                                      "--state-dir", str(tmp_path / "state"), "--metrics-listen", "",
                                      "--source", f"{tmp_path}/*.log:jsn"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no source left to read: source[0].format: unknown format 'jsn'" in proc.stderr
