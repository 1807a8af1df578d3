"""The composition root: opens the stores and wires the services. Every surface (MCP server,
REST/dashboard, CLI, Python API) builds one `Memory` and talks only to its services."""

from __future__ import annotations

from dataclasses import dataclass

from robot_mcp_memory import db, logs
from robot_mcp_memory.config import Settings
from robot_mcp_memory.kit import SqliteStore
from robot_mcp_memory.services.policy import Policy
from robot_mcp_memory.services.processes import ProcessService
from robot_mcp_memory.store import ProcessStore

_log = logs.get("robot_mcp_memory.app")


@dataclass
class Memory:
    settings: Settings
    index: SqliteStore
    policy: Policy
    processes: ProcessService

    @classmethod
    def open(cls, settings: Settings) -> Memory:
        """Open ``index.db`` (creating or migrating it) and log one ``store_ready`` line."""
        index = db.open_index(settings.index_path, hot_queue_max=settings.hot_queue_max)
        report = index.report
        if report is not None:
            _log.info(
                "store_ready",
                path=report.path,
                schema_from=report.from_version,
                schema_to=report.to_version,
                created=report.created,
                rows=report.counts,
                pruned=report.pruned,
            )
        policy = Policy()
        return cls(
            settings=settings,
            index=index,
            policy=policy,
            processes=ProcessService(ProcessStore(index), policy, default_robot=settings.robot_id),
        )

    def close(self) -> None:
        self.index.close()
