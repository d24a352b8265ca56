"""Alerts to people: chat platforms and Alertmanager, delivered in the background (see ``sender``)."""
from .config import AlertsConfig, SinkSpec
from .message import Alert
from .sender import AlertSender

__all__ = ["Alert", "AlertSender", "AlertsConfig", "SinkSpec"]
