from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskContract(_message.Message):
    __slots__ = ("task_name", "contract_version", "contract_hash", "contract_json")
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_HASH_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_JSON_FIELD_NUMBER: _ClassVar[int]
    task_name: str
    contract_version: str
    contract_hash: str
    contract_json: str
    def __init__(self, task_name: _Optional[str] = ..., contract_version: _Optional[str] = ..., contract_hash: _Optional[str] = ..., contract_json: _Optional[str] = ...) -> None: ...

class RegisterWorkerRequest(_message.Message):
    __slots__ = ("worker_id", "runtime", "contracts", "sdk", "extensions")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    CONTRACTS_FIELD_NUMBER: _ClassVar[int]
    SDK_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    runtime: str
    contracts: _containers.RepeatedCompositeFieldContainer[TaskContract]
    sdk: str
    extensions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, worker_id: _Optional[str] = ..., runtime: _Optional[str] = ..., contracts: _Optional[_Iterable[_Union[TaskContract, _Mapping]]] = ..., sdk: _Optional[str] = ..., extensions: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterWorkerResponse(_message.Message):
    __slots__ = ("accepted", "worker_session_id", "heartbeat_interval_ms", "session_timeout_ms", "warnings", "extensions")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    WORKER_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    worker_session_id: str
    heartbeat_interval_ms: int
    session_timeout_ms: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    extensions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, accepted: _Optional[bool] = ..., worker_session_id: _Optional[str] = ..., heartbeat_interval_ms: _Optional[int] = ..., session_timeout_ms: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ..., extensions: _Optional[_Iterable[str]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("worker_session_id",)
    WORKER_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    worker_session_id: str
    def __init__(self, worker_session_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("accepted", "cancel")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    cancel: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, accepted: _Optional[bool] = ..., cancel: _Optional[_Iterable[str]] = ...) -> None: ...

class PollTaskRequest(_message.Message):
    __slots__ = ("worker_session_id", "wait_ms")
    WORKER_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    worker_session_id: str
    wait_ms: int
    def __init__(self, worker_session_id: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class ExecuteTaskRequest(_message.Message):
    __slots__ = ("token", "execution_id", "workflow", "workflow_version", "step_id", "task_name", "contract_version", "input", "idempotency_key", "attempt", "redelivery", "deadline_ms", "timeout_ms", "traceparent")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_VERSION_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REDELIVERY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    token: str
    execution_id: str
    workflow: str
    workflow_version: str
    step_id: str
    task_name: str
    contract_version: str
    input: _struct_pb2.Value
    idempotency_key: str
    attempt: int
    redelivery: bool
    deadline_ms: int
    timeout_ms: int
    traceparent: str
    def __init__(self, token: _Optional[str] = ..., execution_id: _Optional[str] = ..., workflow: _Optional[str] = ..., workflow_version: _Optional[str] = ..., step_id: _Optional[str] = ..., task_name: _Optional[str] = ..., contract_version: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., attempt: _Optional[int] = ..., redelivery: _Optional[bool] = ..., deadline_ms: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., traceparent: _Optional[str] = ...) -> None: ...

class CompleteTaskRequest(_message.Message):
    __slots__ = ("token", "output")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    token: str
    output: _struct_pb2.Value
    def __init__(self, token: _Optional[str] = ..., output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class FailTaskRequest(_message.Message):
    __slots__ = ("token", "error_code", "error_message", "retryable", "details")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    token: str
    error_code: str
    error_message: str
    retryable: bool
    details: _struct_pb2.Value
    def __init__(self, token: _Optional[str] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ..., retryable: _Optional[bool] = ..., details: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class TaskResultAck(_message.Message):
    __slots__ = ("accepted", "reason")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    reason: str
    def __init__(self, accepted: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class ReportThenPollRequest(_message.Message):
    __slots__ = ("complete", "fail", "poll")
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    FAIL_FIELD_NUMBER: _ClassVar[int]
    POLL_FIELD_NUMBER: _ClassVar[int]
    complete: CompleteTaskRequest
    fail: FailTaskRequest
    poll: PollTaskRequest
    def __init__(self, complete: _Optional[_Union[CompleteTaskRequest, _Mapping]] = ..., fail: _Optional[_Union[FailTaskRequest, _Mapping]] = ..., poll: _Optional[_Union[PollTaskRequest, _Mapping]] = ...) -> None: ...

class ReportThenPollResponse(_message.Message):
    __slots__ = ("ack", "task", "poll_error")
    ACK_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    POLL_ERROR_FIELD_NUMBER: _ClassVar[int]
    ack: TaskResultAck
    task: ExecuteTaskRequest
    poll_error: str
    def __init__(self, ack: _Optional[_Union[TaskResultAck, _Mapping]] = ..., task: _Optional[_Union[ExecuteTaskRequest, _Mapping]] = ..., poll_error: _Optional[str] = ...) -> None: ...

class UnregisterWorkerRequest(_message.Message):
    __slots__ = ("worker_session_id",)
    WORKER_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    worker_session_id: str
    def __init__(self, worker_session_id: _Optional[str] = ...) -> None: ...

class UnregisterWorkerResponse(_message.Message):
    __slots__ = ("accepted",)
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    def __init__(self, accepted: _Optional[bool] = ...) -> None: ...
