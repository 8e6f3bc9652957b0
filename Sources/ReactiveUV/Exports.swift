@_exported import ReactiveUVCore
