import Foundation

/// NSLock under a name that keeps test files free of Foundation imports.
typealias NSLockShim = NSLock
