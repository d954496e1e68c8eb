"""The validating admission webhook for the lb.teapot.io kinds.

:func:`review` is pure (AdmissionReview in, AdmissionReview out, using the same
validation as `teapot-lb validate` against the objects already in the cache);
:class:`WebhookServer` serves it over HTTPS with a certificate reloaded from disk.
"""

from teapot_lb.webhook.review import ADMISSION_API_VERSION, BadReview, denial_message, review
from teapot_lb.webhook.server import VALIDATE_PATH, ReloadingCertificate, WebhookServer

__all__ = [
    "ADMISSION_API_VERSION",
    "VALIDATE_PATH",
    "BadReview",
    "ReloadingCertificate",
    "WebhookServer",
    "denial_message",
    "review",
]
