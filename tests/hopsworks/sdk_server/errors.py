"""The error answers of the fake server, in the JSON shape Hopsworks uses.

Hopsworks answers a refused request with ``{"errorCode", "errorMsg", "usrMsg"}`` and an HTTP
status; the SDK turns any non-2xx answer into ``hopsworks_common.client.exceptions.RestAPIError``
and reads those three fields from the body. The codes below are the ones the server rules of
this package raise (values as Hopsworks 5.x defines them in its ``RESTCodes``).
"""

from __future__ import annotations

from typing import Any

#: RESTCodes.FeaturestoreErrorCode.NO_PK_JOINING_KEYS: a join without ``on`` whose groups
#: share no primary-key name.
JOIN_NO_COMMON_PRIMARY_KEY = 270096
#: a tag name without a schema on the cluster (RESTCodes.TagsErrorCode.TAG_NOT_FOUND).
TAG_SCHEMA_NOT_FOUND = 370002
#: a tag value that does not validate against its schema (TagsErrorCode.INVALID_TAG_VALUE).
TAG_VALUE_INVALID = 370005
#: FeaturestoreErrorCode.FEATURE_GROUP_NOT_FOUND / FEATURE_VIEW_NOT_FOUND / TD not found.
FEATURE_GROUP_NOT_FOUND = 270009
FEATURE_VIEW_NOT_FOUND = 270181
TRAINING_DATASET_NOT_FOUND = 270012
#: FeaturestoreErrorCode.ILLEGAL_TRAINING_DATASET_SPLIT (bad split bounds).
ILLEGAL_SPLIT = 270210
#: ProjectErrorCode.PROJECT_NOT_FOUND.
PROJECT_NOT_FOUND = 150004
#: DatasetErrorCode.INODE_NOT_FOUND.
INODE_NOT_FOUND = 110011
#: GenericErrorCode.ILLEGAL_ARGUMENT.
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
