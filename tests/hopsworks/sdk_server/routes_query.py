"""``PUT /featurestores/query``: the query the SDK's Python engine sends to the Query Service.

With ``hqs=true`` Hopsworks answers with ``hqsPayload``, an opaque payload the SDK's flight
client passes on unchanged to the Query Service (:mod:`query_service`). SQL text
(``hqs=false``, e.g. ``Query.to_string``) is not rendered by this fake server: refused with
HTTP 501, not answered with a made-up statement.
"""

from __future__ import annotations

from typing import Any

from sdk_server.errors import UNROUTED, HttpError
from sdk_server.query_service import hqs_payload
from sdk_server.server import FakeHopsworks, route
from sdk_server.transport import Call
from sdk_server.views import resolve


@route("PUT", "/project/{project_id}/featurestores/query")
def construct_query(server: FakeHopsworks, call: Call, project_id: str) -> dict[str, Any]:
    query = call.json()
    if str(call.q("hqs", "false")).lower() != "true":
        raise HttpError(501, UNROUTED, "fake server: SQL text of a query is not rendered "
                                       "(only the Query Service payload, hqs=true)")
    resolve(server.state, query)  # the join rules (e.g. 270096) apply as for a view
    return {"query": "", "queryOnline": "", "hqsPayload": hqs_payload(query),
            "hqsPayloadSignature": None, "onDemandFeatureGroups": [],
            "hudiCachedFeatureGroups": [], "deltaCachedFeatureGroups": []}
