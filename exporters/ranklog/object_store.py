"""An archive root — a local directory or ``s3://bucket/prefix`` — as a pyarrow FileSystem and a path.

Both sides open roots here (the archive writes, query/triage/integrity/report read), so they agree
on where credentials come from. For ``s3://`` the settings are resolved in this order, each one
separately:

- explicit settings (:class:`S3Settings`: the archive's ``s3.*`` config keys / flags);
- the standard AWS environment: ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_REGION`` /
  ``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``,
  ``AWS_PROFILE``;
- the AWS files (``~/.aws/credentials``, ``~/.aws/config``, or ``AWS_SHARED_CREDENTIALS_FILE`` /
  ``AWS_CONFIG_FILE``), read by botocore exactly as the AWS CLI reads them (``endpoint_url`` there too).

pyarrow's S3 client does not read ``AWS_ENDPOINT_URL`` itself, so the resolved endpoint is passed to
:class:`pyarrow.fs.S3FileSystem` explicitly. Secrets live only in the returned objects: :func:`describe`
is what logs and answers print, and it names the bucket, endpoint and key id, never the secret.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import pyarrow.fs as pafs


class StoreConfigError(ValueError):
    """A root or its settings cannot be used (bad URI, unreadable secret file, missing package)."""


@dataclass(frozen=True)
class S3Settings:
    """Explicit S3 settings; empty fields fall back to the AWS environment and files."""

    endpoint_url: str = ""
    region: str = ""
    access_key_id: str = ""
    secret_access_key: str = ""
    session_token: str = ""
    request_timeout: float = 0.0  # seconds per request (0: the client's default)

    @classmethod
    def from_files(cls, endpoint_url: str = "", region: str = "", access_key_id: str = "",
                   secret_access_key_file: str = "", request_timeout: float = 0.0) -> S3Settings:
        """Settings whose secret is read from a file (mode 0600: never on a command line or in YAML)."""
        secret = ""
        if secret_access_key_file:
            try:
                with open(secret_access_key_file, encoding="utf-8") as handle:
                    secret = handle.read().strip()
            except OSError as exc:
                raise StoreConfigError(f"s3.secret_access_key_file: {exc.strerror}") from None
            if not secret:
                raise StoreConfigError("s3.secret_access_key_file: empty")
        if bool(access_key_id) != bool(secret):
            raise StoreConfigError("s3.access_key_id and s3.secret_access_key_file go together")
        return cls(endpoint_url, region, access_key_id, secret, request_timeout=request_timeout)


@dataclass(frozen=True)
class ResolvedS3:
    endpoint_url: str | None
    region: str
    access_key_id: str | None
    secret_access_key: str | None = None
    session_token: str | None = None
    request_timeout: float = 0.0

    def __repr__(self) -> str:  # never the secret, whatever prints this
        return f"ResolvedS3(endpoint_url={self.endpoint_url!r}, region={self.region!r}, key={self.access_key_id!r})"


def is_uri(root: str) -> bool:
    return "://" in root


def split_s3(root: str) -> tuple[str, str]:
    """(bucket, key prefix without slashes) of ``s3://bucket/prefix``."""
    parts = urlsplit(root)
    if parts.scheme != "s3" or not parts.netloc:
        raise StoreConfigError(f"root {root!r}: expected s3://bucket[/prefix]")
    return parts.netloc, parts.path.strip("/")


def resolve_s3(settings: S3Settings | None = None) -> ResolvedS3:
    """Endpoint, region and credentials from `settings`, then the AWS environment and files."""
    settings = settings or S3Settings()
    try:
        import botocore.session
    except ImportError:
        raise StoreConfigError("s3:// roots need botocore: pip install 'ranklog[archive]' or 'ranklog[query]'") from None
    session = botocore.session.get_session()
    region = settings.region or session.get_config_variable("region") or "us-east-1"
    endpoint = (settings.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
                or _config_file_endpoint(session) or None)
    if settings.access_key_id:
        return ResolvedS3(endpoint, region, settings.access_key_id, settings.secret_access_key,
                          settings.session_token or None, settings.request_timeout)
    credentials = _file_credentials(session)
    if credentials is None:  # anonymous or an instance role: left to pyarrow's own AWS SDK chain
        return ResolvedS3(endpoint, region, None, request_timeout=settings.request_timeout)
    frozen = credentials.get_frozen_credentials()
    return ResolvedS3(endpoint, region, frozen.access_key, frozen.secret_key, frozen.token,
                      settings.request_timeout)


def _config_file_endpoint(session: Any) -> str | None:
    try:
        scoped = session.get_scoped_config()
    except Exception:  # a profile named in AWS_PROFILE that the files do not have
        return None
    services = scoped.get("s3") if isinstance(scoped.get("s3"), dict) else {}
    return services.get("endpoint_url") or scoped.get("endpoint_url")


def _file_credentials(session: Any) -> Any:
    """Credentials from the environment and the AWS files only: the metadata-service providers of the
    default chain would reach for a link-local address, which pyarrow's own chain does when needed."""
    from botocore.credentials import create_credential_resolver

    resolver = create_credential_resolver(session)
    resolver.providers = [p for p in resolver.providers if p.METHOD in {"env", "shared-credentials-file",
                                                                       "custom-process", "config-file"}]
    return resolver.load_credentials()


def open_root(root: str, settings: S3Settings | None = None) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path inside it) for a local directory or an ``s3://bucket/prefix`` root."""
    import pyarrow.fs as pafs

    if not is_uri(root):
        return pafs.LocalFileSystem(), os.path.abspath(root).rstrip("/") or "/"
    if not root.startswith("s3://"):
        try:
            filesystem, path = pafs.FileSystem.from_uri(root)
        except Exception as exc:  # pyarrow raises several types for bad URIs
            raise StoreConfigError(f"root {root!r}: {str(exc).splitlines()[0]}") from None
        return filesystem, path.rstrip("/")
    bucket, prefix = split_s3(root)
    resolved = resolve_s3(settings)
    return s3_filesystem(resolved), f"{bucket}/{prefix}".rstrip("/")


def s3_filesystem(resolved: ResolvedS3) -> pafs.S3FileSystem:
    import pyarrow.fs as pafs

    options: dict[str, Any] = {"region": resolved.region, "allow_bucket_creation": False,
                               "allow_bucket_deletion": False, "check_directory_existence_before_creation": True}
    if resolved.endpoint_url:
        parts = urlsplit(resolved.endpoint_url)
        options["endpoint_override"] = parts.netloc or resolved.endpoint_url
        options["scheme"] = parts.scheme or "https"
    if resolved.access_key_id:
        options.update(access_key=resolved.access_key_id, secret_key=resolved.secret_access_key,
                       session_token=resolved.session_token)
    if resolved.request_timeout:
        options.update(request_timeout=resolved.request_timeout, connect_timeout=resolved.request_timeout)
    return pafs.S3FileSystem(**options)


def describe(root: str, settings: S3Settings | None = None) -> str:
    """The root for logs and answers: endpoint and key id, never a secret."""
    if not root.startswith("s3://"):
        return root
    resolved = resolve_s3(settings)
    key = resolved.access_key_id or "default chain"
    return f"{root} (endpoint {resolved.endpoint_url or 'AWS'}, region {resolved.region}, key {key})"
