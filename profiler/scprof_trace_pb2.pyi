from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TrackKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRACK_KIND_UNSPECIFIED: _ClassVar[TrackKind]
    TRACK_KIND_HOST: _ClassVar[TrackKind]
    TRACK_KIND_TENSORCORE: _ClassVar[TrackKind]
    TRACK_KIND_SPARSECORE: _ClassVar[TrackKind]
    TRACK_KIND_SC_TILE: _ClassVar[TrackKind]
    TRACK_KIND_COUNTER: _ClassVar[TrackKind]
TRACK_KIND_UNSPECIFIED: TrackKind
TRACK_KIND_HOST: TrackKind
TRACK_KIND_TENSORCORE: TrackKind
TRACK_KIND_SPARSECORE: TrackKind
TRACK_KIND_SC_TILE: TrackKind
TRACK_KIND_COUNTER: TrackKind

class TraceFile(_message.Message):
    __slots__ = ("magic", "chunk")
    MAGIC_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    magic: bytes
    chunk: _containers.RepeatedCompositeFieldContainer[Chunk]
    def __init__(self, magic: _Optional[bytes] = ..., chunk: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("crc32", "header", "strings", "tracks", "events", "counters", "steps", "partition_stats", "footer")
    CRC32_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    STRINGS_FIELD_NUMBER: _ClassVar[int]
    TRACKS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_STATS_FIELD_NUMBER: _ClassVar[int]
    FOOTER_FIELD_NUMBER: _ClassVar[int]
    crc32: int
    header: Header
    strings: StringTable
    tracks: TrackTable
    events: EventBatch
    counters: CounterBatch
    steps: StepBatch
    partition_stats: PartitionStatsBatch
    footer: Footer
    def __init__(self, crc32: _Optional[int] = ..., header: _Optional[_Union[Header, _Mapping]] = ..., strings: _Optional[_Union[StringTable, _Mapping]] = ..., tracks: _Optional[_Union[TrackTable, _Mapping]] = ..., events: _Optional[_Union[EventBatch, _Mapping]] = ..., counters: _Optional[_Union[CounterBatch, _Mapping]] = ..., steps: _Optional[_Union[StepBatch, _Mapping]] = ..., partition_stats: _Optional[_Union[PartitionStatsBatch, _Mapping]] = ..., footer: _Optional[_Union[Footer, _Mapping]] = ...) -> None: ...

class Header(_message.Message):
    __slots__ = ("format_version", "run_id", "run_name", "producer", "clock_unit", "hardware", "config_json", "start_time_unix_ns", "tags")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_NAME_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    CLOCK_UNIT_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    START_TIME_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    run_id: str
    run_name: str
    producer: str
    clock_unit: str
    hardware: Hardware
    config_json: str
    start_time_unix_ns: int
    tags: _containers.ScalarMap[str, str]
    def __init__(self, format_version: _Optional[int] = ..., run_id: _Optional[str] = ..., run_name: _Optional[str] = ..., producer: _Optional[str] = ..., clock_unit: _Optional[str] = ..., hardware: _Optional[_Union[Hardware, _Mapping]] = ..., config_json: _Optional[str] = ..., start_time_unix_ns: _Optional[int] = ..., tags: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Hardware(_message.Message):
    __slots__ = ("generation", "num_chips", "sparsecores_per_chip", "tiles_per_sparsecore", "simd_width", "hbm_bytes", "hbm_bandwidth_bytes_per_s", "tc_peak_flops", "ici_bandwidth_bytes_per_s", "spmem_bytes_per_tile", "extra_json")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NUM_CHIPS_FIELD_NUMBER: _ClassVar[int]
    SPARSECORES_PER_CHIP_FIELD_NUMBER: _ClassVar[int]
    TILES_PER_SPARSECORE_FIELD_NUMBER: _ClassVar[int]
    SIMD_WIDTH_FIELD_NUMBER: _ClassVar[int]
    HBM_BYTES_FIELD_NUMBER: _ClassVar[int]
    HBM_BANDWIDTH_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    TC_PEAK_FLOPS_FIELD_NUMBER: _ClassVar[int]
    ICI_BANDWIDTH_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    SPMEM_BYTES_PER_TILE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    generation: str
    num_chips: int
    sparsecores_per_chip: int
    tiles_per_sparsecore: int
    simd_width: int
    hbm_bytes: int
    hbm_bandwidth_bytes_per_s: float
    tc_peak_flops: float
    ici_bandwidth_bytes_per_s: float
    spmem_bytes_per_tile: int
    extra_json: str
    def __init__(self, generation: _Optional[str] = ..., num_chips: _Optional[int] = ..., sparsecores_per_chip: _Optional[int] = ..., tiles_per_sparsecore: _Optional[int] = ..., simd_width: _Optional[int] = ..., hbm_bytes: _Optional[int] = ..., hbm_bandwidth_bytes_per_s: _Optional[float] = ..., tc_peak_flops: _Optional[float] = ..., ici_bandwidth_bytes_per_s: _Optional[float] = ..., spmem_bytes_per_tile: _Optional[int] = ..., extra_json: _Optional[str] = ...) -> None: ...

class StringTable(_message.Message):
    __slots__ = ("first_id", "value")
    FIRST_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    first_id: int
    value: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, first_id: _Optional[int] = ..., value: _Optional[_Iterable[str]] = ...) -> None: ...

class Track(_message.Message):
    __slots__ = ("id", "plane", "line", "kind", "chip", "core", "tile", "unit")
    ID_FIELD_NUMBER: _ClassVar[int]
    PLANE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CHIP_FIELD_NUMBER: _ClassVar[int]
    CORE_FIELD_NUMBER: _ClassVar[int]
    TILE_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    id: int
    plane: str
    line: str
    kind: TrackKind
    chip: int
    core: int
    tile: int
    unit: str
    def __init__(self, id: _Optional[int] = ..., plane: _Optional[str] = ..., line: _Optional[str] = ..., kind: _Optional[_Union[TrackKind, str]] = ..., chip: _Optional[int] = ..., core: _Optional[int] = ..., tile: _Optional[int] = ..., unit: _Optional[str] = ...) -> None: ...

class TrackTable(_message.Message):
    __slots__ = ("track",)
    TRACK_FIELD_NUMBER: _ClassVar[int]
    track: _containers.RepeatedCompositeFieldContainer[Track]
    def __init__(self, track: _Optional[_Iterable[_Union[Track, _Mapping]]] = ...) -> None: ...

class EventBatch(_message.Message):
    __slots__ = ("track", "name", "start_ps", "dur_ps", "step", "table", "sc", "minibatch", "ids", "unique_ids", "dropped_ids", "bytes", "flops", "arg_event", "arg_key", "arg_kind", "arg_int", "arg_double", "arg_string", "category")
    TRACK_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    START_PS_FIELD_NUMBER: _ClassVar[int]
    DUR_PS_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    SC_FIELD_NUMBER: _ClassVar[int]
    MINIBATCH_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_IDS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_IDS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    FLOPS_FIELD_NUMBER: _ClassVar[int]
    ARG_EVENT_FIELD_NUMBER: _ClassVar[int]
    ARG_KEY_FIELD_NUMBER: _ClassVar[int]
    ARG_KIND_FIELD_NUMBER: _ClassVar[int]
    ARG_INT_FIELD_NUMBER: _ClassVar[int]
    ARG_DOUBLE_FIELD_NUMBER: _ClassVar[int]
    ARG_STRING_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    track: _containers.RepeatedScalarFieldContainer[int]
    name: _containers.RepeatedScalarFieldContainer[int]
    start_ps: _containers.RepeatedScalarFieldContainer[int]
    dur_ps: _containers.RepeatedScalarFieldContainer[int]
    step: _containers.RepeatedScalarFieldContainer[int]
    table: _containers.RepeatedScalarFieldContainer[int]
    sc: _containers.RepeatedScalarFieldContainer[int]
    minibatch: _containers.RepeatedScalarFieldContainer[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    unique_ids: _containers.RepeatedScalarFieldContainer[int]
    dropped_ids: _containers.RepeatedScalarFieldContainer[int]
    bytes: _containers.RepeatedScalarFieldContainer[int]
    flops: _containers.RepeatedScalarFieldContainer[int]
    arg_event: _containers.RepeatedScalarFieldContainer[int]
    arg_key: _containers.RepeatedScalarFieldContainer[int]
    arg_kind: _containers.RepeatedScalarFieldContainer[int]
    arg_int: _containers.RepeatedScalarFieldContainer[int]
    arg_double: _containers.RepeatedScalarFieldContainer[float]
    arg_string: _containers.RepeatedScalarFieldContainer[int]
    category: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, track: _Optional[_Iterable[int]] = ..., name: _Optional[_Iterable[int]] = ..., start_ps: _Optional[_Iterable[int]] = ..., dur_ps: _Optional[_Iterable[int]] = ..., step: _Optional[_Iterable[int]] = ..., table: _Optional[_Iterable[int]] = ..., sc: _Optional[_Iterable[int]] = ..., minibatch: _Optional[_Iterable[int]] = ..., ids: _Optional[_Iterable[int]] = ..., unique_ids: _Optional[_Iterable[int]] = ..., dropped_ids: _Optional[_Iterable[int]] = ..., bytes: _Optional[_Iterable[int]] = ..., flops: _Optional[_Iterable[int]] = ..., arg_event: _Optional[_Iterable[int]] = ..., arg_key: _Optional[_Iterable[int]] = ..., arg_kind: _Optional[_Iterable[int]] = ..., arg_int: _Optional[_Iterable[int]] = ..., arg_double: _Optional[_Iterable[float]] = ..., arg_string: _Optional[_Iterable[int]] = ..., category: _Optional[_Iterable[int]] = ...) -> None: ...

class CounterBatch(_message.Message):
    __slots__ = ("track", "ts_ps", "value")
    TRACK_FIELD_NUMBER: _ClassVar[int]
    TS_PS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    track: _containers.RepeatedScalarFieldContainer[int]
    ts_ps: _containers.RepeatedScalarFieldContainer[int]
    value: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, track: _Optional[_Iterable[int]] = ..., ts_ps: _Optional[_Iterable[int]] = ..., value: _Optional[_Iterable[float]] = ...) -> None: ...

class StepBatch(_message.Message):
    __slots__ = ("track", "step", "start_ps", "dur_ps")
    TRACK_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    START_PS_FIELD_NUMBER: _ClassVar[int]
    DUR_PS_FIELD_NUMBER: _ClassVar[int]
    track: _containers.RepeatedScalarFieldContainer[int]
    step: _containers.RepeatedScalarFieldContainer[int]
    start_ps: _containers.RepeatedScalarFieldContainer[int]
    dur_ps: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, track: _Optional[_Iterable[int]] = ..., step: _Optional[_Iterable[int]] = ..., start_ps: _Optional[_Iterable[int]] = ..., dur_ps: _Optional[_Iterable[int]] = ...) -> None: ...

class PartitionStatsBatch(_message.Message):
    __slots__ = ("step", "chip", "sc", "table", "ids", "unique_ids", "max_ids_per_partition", "max_unique_ids_per_partition", "minibatches", "dropped_ids")
    STEP_FIELD_NUMBER: _ClassVar[int]
    CHIP_FIELD_NUMBER: _ClassVar[int]
    SC_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_IDS_FIELD_NUMBER: _ClassVar[int]
    MAX_IDS_PER_PARTITION_FIELD_NUMBER: _ClassVar[int]
    MAX_UNIQUE_IDS_PER_PARTITION_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    DROPPED_IDS_FIELD_NUMBER: _ClassVar[int]
    step: _containers.RepeatedScalarFieldContainer[int]
    chip: _containers.RepeatedScalarFieldContainer[int]
    sc: _containers.RepeatedScalarFieldContainer[int]
    table: _containers.RepeatedScalarFieldContainer[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    unique_ids: _containers.RepeatedScalarFieldContainer[int]
    max_ids_per_partition: _containers.RepeatedScalarFieldContainer[int]
    max_unique_ids_per_partition: _containers.RepeatedScalarFieldContainer[int]
    minibatches: _containers.RepeatedScalarFieldContainer[int]
    dropped_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, step: _Optional[_Iterable[int]] = ..., chip: _Optional[_Iterable[int]] = ..., sc: _Optional[_Iterable[int]] = ..., table: _Optional[_Iterable[int]] = ..., ids: _Optional[_Iterable[int]] = ..., unique_ids: _Optional[_Iterable[int]] = ..., max_ids_per_partition: _Optional[_Iterable[int]] = ..., max_unique_ids_per_partition: _Optional[_Iterable[int]] = ..., minibatches: _Optional[_Iterable[int]] = ..., dropped_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class Footer(_message.Message):
    __slots__ = ("events", "counters", "steps", "partition_stats", "chunks", "end_time_unix_ns")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_STATS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    END_TIME_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    events: int
    counters: int
    steps: int
    partition_stats: int
    chunks: int
    end_time_unix_ns: int
    def __init__(self, events: _Optional[int] = ..., counters: _Optional[int] = ..., steps: _Optional[int] = ..., partition_stats: _Optional[int] = ..., chunks: _Optional[int] = ..., end_time_unix_ns: _Optional[int] = ...) -> None: ...
