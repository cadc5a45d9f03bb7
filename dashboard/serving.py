"""The dashboard's safety settings, whatever folder it is started from, and the Host it answers to.

**Settings.** Streamlit reads ``.streamlit/config.toml`` in the folder it is started from, and (the
"script-level" file of recent versions) in the folder of the script it runs. The project's settings
live in ``.streamlit/config.toml`` at the top (the layout of its design card), and the same file sits
beside the app in ``dashboard/.streamlit/config.toml`` (a test keeps them identical), so that
``streamlit run /path/to/dashboard/app.py`` started in another folder still answers this machine
only, shows no error details and sends no usage statistics (issue 34: started elsewhere, it listened
on every interface, showed full error details and sent usage statistics). The app checks at every
run that the settings took effect (:func:`unsafe_settings`): a setting left at Streamlit's default,
as happens when no file was read (an older Streamlit, a copied app), makes the app refuse to show
its pages and say how to start it. A value set on purpose (``--server.address 0.0.0.0`` to serve a
team behind a proxy) is the operator's decision and is accepted.

**Host.** Streamlit's WebSocket accepts any ``Host`` header, so a web page whose own name the
attacker points at 127.0.0.1 (DNS rebinding) could drive a dashboard listening on this machine from a
visitor's browser. The app answers only to the names it is served under (:func:`host_allowed`): this
machine's own names (``localhost``, ``127.0.0.1``, ``::1``), the ``server.address`` it listens on, and
the names listed in ``PBR_CALIB_ALLOWED_HOSTS`` (comma-separated). Listening on every interface
(``0.0.0.0``) without that list, it leaves the check to the reverse proxy in front of it (README,
"Serving").
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

__all__ = ["ALLOWED_HOSTS_ENV", "LOCAL_HOSTS", "SAFE_SETTINGS", "host_allowed", "host_name", "unsafe_settings"]

#: Names under which a dashboard listening on this machine only is reached.
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
#: Comma-separated host names a served dashboard answers to (besides LOCAL_HOSTS and server.address).
ALLOWED_HOSTS_ENV = "PBR_CALIB_ALLOWED_HOSTS"
#: Addresses that mean "every interface".
_WILDCARDS = ("0.0.0.0", "::", "")

#: The settings whose Streamlit default is unsafe here (what each default does: texts.SERVING_DEFAULTS).
SAFE_SETTINGS = ("server.address", "client.showErrorDetails", "browser.gatherUsageStats")


def _unsafe_value(key: str, value: Any) -> bool:
    if key == "server.address":
        return not value
    if key == "client.showErrorDetails":
        return value not in ("none", False)
    return bool(value)


def unsafe_settings(get_option: Callable[[str], Any] | None = None,
                    is_manually_set: Callable[[str], bool] | None = None) -> list[str]:
    """The settings of :data:`SAFE_SETTINGS` left at Streamlit's unsafe default (empty when the
    project's settings took effect).

    A setting given on purpose (a config file, an environment variable, a command-line flag) is
    never reported, whatever its value. The two callables default to ``streamlit.config``'s.
    """
    if get_option is None or is_manually_set is None:
        from streamlit import config

        get_option, is_manually_set = config.get_option, config.is_manually_set
    return [key for key in SAFE_SETTINGS if _unsafe_value(key, get_option(key)) and not is_manually_set(key)]


def host_name(host: str) -> str:
    """The name of a ``Host`` header, lower-case, without the port (``[::1]:8501`` -> ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def host_allowed(headers: Mapping[str, str], address: str | None,
                 environ: Mapping[str, str] | None = None) -> bool:
    """Whether a request with these headers may use the dashboard (see the module docstring).

    No ``Host`` header (the app run without a browser, as in Streamlit's AppTest) is allowed: every
    browser sends one.
    """
    environ = os.environ if environ is None else environ
    host = next((v for k, v in headers.items() if k.lower() == "host"), None)
    if host is None:
        return True
    listed = [h.strip().lower() for h in environ.get(ALLOWED_HOSTS_ENV, "").split(",") if h.strip()]
    address = (address or "").strip().lower()
    if address in _WILDCARDS and not listed:
        return True  # every interface, no list: the reverse proxy in front checks the name
    allowed = {*LOCAL_HOSTS, *listed, *([host_name(address)] if address not in _WILDCARDS else [])}
    return host_name(host) in allowed
