"""Named caps on what one request may make the bridge do or store (docs/http-api.md#limits).

Every cap is checked before the expensive work (schema validation, digests, state writes), so the
worst request a client can send costs a bounded, small amount of CPU and disk. Values are chosen
far above what a real AG-UI client sends and low enough that a maximal body is validated well
within the heartbeat interval of the other streams of the worker.
"""

from __future__ import annotations

from typing import Final

# ------------------------------------------------------------------------------------------- ids

#: threadId, runId, parentRunId, userId, message ids, toolCallId, interruptId, executionId
#: (characters). 200 also keeps a verbatim thread file name (`<id>.json.lock`, its temp files)
#: far below the 255-byte name limit of common filesystems.
MAX_ID_CHARS: Final = 200
#: rosInvocationId (characters), as documented in docs/design.md#input-validation.
MAX_ROS_INVOCATION_ID_CHARS: Final = 256

# ------------------------------------------------------------------------------------------- body shape

#: Nesting depth of objects and arrays in the JSON body (the body object itself is level 1).
MAX_JSON_DEPTH: Final = 64
#: Every JSON value of the body counts: objects, arrays, strings, numbers, booleans and nulls.
MAX_JSON_VALUES: Final = 100_000
#: Entries of `messages`.
MAX_MESSAGES: Final = 1_000
#: Content parts plus tool calls, summed over all messages.
MAX_CONTENT_PARTS: Final = 2_000
#: Entries of each of `tools`, `context` and `resume`.
MAX_LIST_ITEMS: Final = 256
#: Characters of text in one message (string content, or the sum of its text parts). Media
#: sources are bounded by the image rules and the body size instead.
MAX_MESSAGE_TEXT_CHARS: Final = 1024 * 1024

# ------------------------------------------------------------------------------------------- resume answers

#: One resume answer's payload, as characters of compact JSON (counted from below, by a walk that stops at
#: the cap): far above any real answer (a decision, an option id, a free text), and small enough that its
#: schema validation stays short. Over it the answer is RESUME_PAYLOAD_INVALID (docs/design.md#answer-validation).
MAX_ANSWER_JSON_CHARS: Final = 256 * 1024
#: A string a `format` check scans (uri, hostname, email, ...): a longer one is no valid value of any checked
#: format in an answer, and is refused before any pattern runs over it.
MAX_FORMAT_VALUE_CHARS: Final = 64 * 1024

# ------------------------------------------------------------------------------------------- cwd

#: One path component (bytes, UTF-8), the usual NAME_MAX.
MAX_PATH_COMPONENT_BYTES: Final = 255
#: A whole workspace path (bytes, UTF-8), the usual PATH_MAX.
MAX_PATH_BYTES: Final = 4096

# ------------------------------------------------------------------------------------------- uploads

#: A body must arrive at UPLOAD_MIN_BYTES_PER_S on average once this grace period has passed.
UPLOAD_GRACE_S: Final = 10.0
UPLOAD_MIN_BYTES_PER_S: Final = 64 * 1024
#: No body may take longer than this to arrive, whatever its size.
UPLOAD_DEADLINE_S: Final = 120.0

# ------------------------------------------------------------------------------------------- state

#: runId -> request digest entries kept per thread (newest by admission order).
MAX_RUN_DIGESTS: Final = 256
#: Terminal executionIds kept per thread (newest by retirement order).
MAX_TERMINAL_EXECUTION_IDS: Final = 64
#: Applied resume digests kept per thread (newest by application order).
MAX_APPLIED_RESUME_DIGESTS: Final = 256

# ------------------------------------------------------------------------------------------- sweeping

#: Orphaned lock files and temp files younger than this are left alone (a writer may still use them).
SWEEP_MIN_AGE_S: Final = 60.0
