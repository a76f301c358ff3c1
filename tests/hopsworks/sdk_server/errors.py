"""The error answers of the fake server, in the JSON shape Hopsworks uses.

Hopsworks answers a refused request with ``{"errorCode", "errorMsg", "usrMsg"}`` and an HTTP
status; the SDK turns any non-2xx answer into ``hopsworks_common.client.exceptions.RestAPIError``
and reads those three fields from the body.
"""

from __future__ import annotations

from typing import Any

#: A join without ``on`` whose groups share no primary-key name (the value the issue reports
#: from a 5.2 cluster; not named in the SDK source).
JOIN_NO_COMMON_PRIMARY_KEY = 270096
#: Codes the installed SDK itself names (``NOT_FOUND_ERROR_CODE`` of FeatureGroupBase,
#: FeatureView, TrainingDatasetBase and Tag): the SDK turns these into "absent" answers.
FEATURE_GROUP_NOT_FOUND = 270009
FEATURE_VIEW_NOT_FOUND = 270181
TRAINING_DATASET_NOT_FOUND = 270012
#: From the Hopsworks server's RESTCodes (FeaturestoreErrorCode 179, HTTP 400).
FEATURE_VIEW_ALREADY_EXISTS = 270179
TAG_NOT_FOUND = 370002
#: The codes below are this fake server's choice (the SDK does not name them; a recording
#: from a cluster, ``tests/hopsworks/record_fixtures.py``, shows the real ones). Tests assert
#: that fstrain keeps whatever code the server sent, never these values' meaning.
TAG_SCHEMA_NOT_FOUND = 370001  # a tag name without a schema on the cluster
TAG_VALUE_INVALID = 370005  # a tag value that does not validate against its schema
ILLEGAL_SPLIT = 270210  # split bounds that are not epoch milliseconds
PROJECT_NOT_FOUND = 150004
INODE_NOT_FOUND = 110011
ILLEGAL_ARGUMENT = 120001
#: a request the fake server has no rule for (never a Hopsworks code).
UNROUTED = 999999


class HttpError(Exception):
    """Raised by a handler; becomes an HTTP answer with the Hopsworks error body."""

    def __init__(self, status: int, code: int, message: str, user_message: str = "") -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.user_message = user_message or message

    def body(self) -> dict[str, Any]:
        return {"errorCode": self.code, "errorMsg": self.message, "usrMsg": self.user_message}


def not_found(code: int, what: str) -> HttpError:
    return HttpError(404, code, f"{what} not found", f"{what} was not found")


def bad_request(code: int, message: str, user_message: str = "") -> HttpError:
    return HttpError(400, code, message, user_message)
