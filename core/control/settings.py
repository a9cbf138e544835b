"""Altering and describing the logged settings (Kafka's IncrementalAlterConfigs / DescribeConfigs for the
cluster's BROKER resource, as ConfigurationControlManager validates them).

Both need the requester's right on the cluster under the settings in force *before* the change:
ALTER_CONFIGS to alter, DESCRIBE_CONFIGS to describe. A setting that decides who is authorized or who may log
in (super.users, allow.everyone.if.no.acl.found, ...) also needs ALTER on the cluster, the right writing ACLs
needs; each setting's rights are its declaration's (secmeta.core.settings.Setting.rights), checked for every
name set or deleted before anything is written. A request with any unknown setting or bad value
raises InvalidRequestException naming it, and logs nothing; the settings' names, text forms and checks
are secmeta.core.settings'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from secmeta.core import settings as logged
from secmeta.core.config import StoreConfig
from secmeta.core.control.authz import Decider, require_cluster
from secmeta.core.control.result import ControlResult
from secmeta.core.errors import InvalidRequestException, InvalidValueError
from secmeta.core.types import RequestContext
from secmeta.events.types import AclOperation

__all__ = ["alter_settings", "describe_settings", "initial_settings"]


def alter_settings(image, set_: Mapping[str, str], delete: Iterable[str], context: RequestContext, *,
                   config: StoreConfig, decider: Decider) -> ControlResult[list[str]]:
    """One SecuritySettingAltered per setting that changes; the response names them (needs ALTER_CONFIGS on CLUSTER,
    and ALTER too for a setting that decides access: ``logged.rights_to_change``)."""
    for right in logged.TUNING:  # what every setting needs
        require_cluster(decider, context, right)
    for name, right in logged.rights_to_change([*set_, *delete]):
        require_cluster(decider, context, right,
                        why=f" (setting {name} decides access, so changing it needs {right.name} on the cluster, "
                            "as writing ACLs does)")
    try:
        events = logged.events_for(config, image, dict(set_), list(delete))
    except InvalidValueError as exc:
        raise InvalidRequestException(str(exc)) from None
    return ControlResult(events, [e.setting_name for e in events])


def describe_settings(image, context: RequestContext, *, config: StoreConfig, decider: Decider) -> list[dict]:
    """Every logged setting in force at ``image`` (needs DESCRIBE_CONFIGS on CLUSTER)."""
    require_cluster(decider, context, AclOperation.DESCRIBE_CONFIGS)
    return logged.describe(config, image)


def initial_settings(image, config: StoreConfig) -> ControlResult[int]:
    """The config's value of every setting the log has not set yet, as events (a new store's first batch, or
    the first writer open of a store made before settings were logged); how many."""
    events = logged.initial_events(config, image)
    return ControlResult(events, len(events))
