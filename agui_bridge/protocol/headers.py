"""HTTP header names of the bridge's wire, declared once.

The reattach names are shared by the bridge's route and the chat client's follower: the run's credential
travels in a header so that it stays out of every URL a server or proxy logs (docs/design.md#reattach); the
query form is for clients that cannot set headers.
"""

#: The reattach route reads the run's `rosInvocationId` from this header first.
ROS_INVOCATION_ID_HEADER = "Ros-Invocation-Id"
#: The query parameter the route falls back to when the header is absent or empty.
ROS_INVOCATION_ID_QUERY = "rosInvocationId"
#: `POST /` answers with the run's executionId in this header, with the headers before the first event, so
#: that a load balancer can learn which host holds the execution for the cancel route
#: (docs/http-api.md#execution-id-header).
EXECUTION_ID_HEADER = "Agui-Execution-Id"
