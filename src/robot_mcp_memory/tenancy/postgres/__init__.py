"""The tenancy state replicas share on PostgreSQL: browser sessions (`sessions.PostgresSessions`)
and the token throttle (`throttle.PostgresThrottle`), on the ports of `tenancy.ports`."""
