"""Per-node archive tokens derived from one vault secret (ranklog.stack.node_token, .node_tokens).

A node's token is HMAC-SHA256(secret, "ranklog-node-token/v1:" + node name), hex. The archive role
templates every node's line (``TOKEN IDENTITY HOST-PATTERN…``, see ranklog.archive.auth) and each
agent installs only its own, so one secret in Ansible Vault yields one token per node, nothing
per-node is stored, and a stolen node token lets its holder write only that node's records.
Rotating the secret rotates every token (roll the archives and the agents in one run).

    ranklog_agent_token: "{{ vault_ranklog_node_secret | ranklog.stack.node_token(inventory_hostname) }}"
    ranklog_archive_node_tokens: "{{ groups['training_nodes'] | ranklog.stack.node_tokens(vault_ranklog_node_secret) }}"
"""

from __future__ import annotations

import hashlib
import hmac
import re

from ansible.errors import AnsibleFilterError

_IDENTITY = re.compile(r"^[A-Za-z0-9._-]+$")
_CONTEXT = b"ranklog-node-token/v1:"


def _secret(secret) -> bytes:
    if not isinstance(secret, str) or len(secret) < 16:
        raise AnsibleFilterError("ranklog.stack.node_token: the secret must be a string of at least 16 characters")
    return secret.encode()


def _identity(node) -> str:
    if not isinstance(node, str) or not _IDENTITY.match(node):
        raise AnsibleFilterError(f"ranklog.stack.node_token: node name {node!r} must be letters, digits, '.', '_', '-'")
    return node


def node_token(secret, node) -> str:
    """The token of `node`."""
    return hmac.new(_secret(secret), _CONTEXT + _identity(node).encode(), hashlib.sha256).hexdigest()


def node_tokens(nodes, secret, hosts=None) -> list[dict]:
    """Tokens-file entries of `nodes`: {identity, token, hosts}; `hosts` maps a node to the host
    names/globs its records may carry (default: the node's own name)."""
    if isinstance(nodes, str) or not isinstance(nodes, (list, tuple)):
        raise AnsibleFilterError("ranklog.stack.node_tokens: expects a list of node names")
    extra = hosts or {}
    return [{"identity": node, "token": node_token(secret, node), "hosts": list(extra.get(node) or [node])}
            for node in nodes]


class FilterModule:
    def filters(self):
        return {"node_token": node_token, "node_tokens": node_tokens}
