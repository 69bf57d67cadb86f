"""Who makes a run, as memstore can tell on its own: the OS user and the host.

On PostgreSQL the run's identity is the connecting role, set by the database (revision 0007);
these are what SQLite, which has no roles, records instead, and the host on both.
"""

from __future__ import annotations

import getpass
import socket


def os_user() -> str | None:
    """The OS user's name, or None where there is none to tell (no passwd entry, no $USER)."""
    try:
        return getpass.getuser() or None
    except (OSError, KeyError):
        return None


def host() -> str | None:
    return socket.gethostname() or None
