"""Where the CI workflow installs the harness from: what is installed here, never a bare name.

``model-harness`` is not published on the public index, so a workflow that falls back to
``pip install model-harness==<version>`` fails on its first push -- and runs whatever anyone who
registers that name uploads (dependency confusion). The install line ``harness init`` writes is
read from how this harness was installed (PEP 610, the distribution's ``direct_url.json``):

- from a git URL (``pip install git+https://...``): that URL at the installed commit;
- from a wheel or sdist file or URL: that URL with its sha256, so pip refuses any other file;
- editable or from a directory that is a git checkout: the checkout's ``origin`` at its ``HEAD``
  commit (a checkout without a remote: the local repository, which a CI runner cannot reach);
- from an index (no ``direct_url.json``): nothing -- a name alone is the unsafe case.

When the spec cannot resolve on a CI runner (a local path, no spec at all) ``harness init`` says so
and tells the team to set the repository variable ``HARNESS_SPEC``; the workflow fails its install
step with that instruction instead of guessing.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "model-harness"
#: the repository variable the workflow installs from first (Settings -> Variables)
SPEC_VARIABLE = "HARNESS_SPEC"


@dataclass(frozen=True)
class InstallSpec:
    """A pip requirement for the installed harness and whether a CI runner can resolve it."""

    requirement: str  # '' when nothing installed here names a source
    how: str  # where it came from, for the user
    portable: bool  # False: a path on this machine (or nothing): HARNESS_SPEC must be set

    def advice(self) -> str:
        """What ``harness init`` prints about the install line."""
        if not self.requirement:
            return (f"the workflow installs the harness from the repository variable {SPEC_VARIABLE} and fails until it "
                    f"is set ({self.how}): set {SPEC_VARIABLE} (Settings -> Variables) to a git URL "
                    f"(\"{DISTRIBUTION} @ git+https://<host>/<org>/model-harness@<commit>\"), a wheel URL, or the "
                    "name with PIP_INDEX_URL naming your index")
        if not self.portable:
            return (f"the workflow installs {self.requirement} ({self.how}); a CI runner cannot reach it: set the "
                    f"repository variable {SPEC_VARIABLE} (Settings -> Variables) to a git URL or a wheel URL it can")
        return (f"the workflow installs {self.requirement} ({self.how}); the repository variable {SPEC_VARIABLE} "
                "overrides it")


def _git(directory: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _from_checkout(directory: Path, editable: bool) -> InstallSpec:
    kind = "an editable install" if editable else "a directory install"
    commit = _git(directory, "rev-parse", "HEAD")
    if not commit:
        return InstallSpec(f"{DISTRIBUTION} @ {directory.as_uri()}", f"{kind} of {directory}, not a git checkout", False)
    remote = _git(directory, "remote", "get-url", "origin")
    dirty = " (with uncommitted changes the workflow will not see)" if _git(directory, "status", "--porcelain") else ""
    if remote:
        url = remote if "://" in remote else "ssh://" + remote.replace(":", "/", 1)  # git@host:org/repo
        return InstallSpec(f"{DISTRIBUTION} @ git+{url}@{commit}", f"{kind} of the checkout {directory} at "
                           f"{commit[:12]}{dirty}", True)
    return InstallSpec(f"{DISTRIBUTION} @ git+{directory.as_uri()}@{commit}",
                       f"{kind} of {directory} at {commit[:12]}, a checkout without a remote{dirty}", False)


def from_direct_url(direct_url: dict[str, object] | None) -> InstallSpec:
    """The install line a PEP 610 record implies (None: installed from an index)."""
    if not direct_url:
        return InstallSpec("", "installed from a package index, which a bare name would let anyone's upload "
                               "answer", False)
    url = str(direct_url.get("url", ""))
    vcs = direct_url.get("vcs_info")
    if isinstance(vcs, dict):
        commit = str(vcs.get("commit_id", ""))
        return InstallSpec(f"{DISTRIBUTION} @ {vcs.get('vcs', 'git')}+{url}@{commit}",
                           f"installed from {url} at {commit[:12]}", not url.startswith("file:"))
    archive = direct_url.get("archive_info")
    if isinstance(archive, dict):
        hashes = archive.get("hashes")
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        if sha is None and str(archive.get("hash", "")).startswith("sha256="):
            sha = str(archive["hash"]).split("=", 1)[1]
        fragment = f"#sha256={sha}" if sha else ""
        return InstallSpec(f"{DISTRIBUTION} @ {url}{fragment}", f"installed from the file {url}"
                           + ("" if sha else " (no hash recorded)"), not url.startswith("file:"))
    info = direct_url.get("dir_info")
    editable = isinstance(info, dict) and bool(info.get("editable"))
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return _from_checkout(Path(unquote(parsed.path)), editable)
    return InstallSpec(f"{DISTRIBUTION} @ {url}", f"installed from {url}", True)


def installed_spec() -> InstallSpec:
    """The install line of the harness installed in this environment."""
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return InstallSpec("", f"{DISTRIBUTION} is not installed as a distribution here", False)
    try:
        record = json.loads(text) if text else None
    except ValueError:
        record = None
    return from_direct_url(record if isinstance(record, dict) else None)
