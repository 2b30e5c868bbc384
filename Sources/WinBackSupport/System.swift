import Foundation

/// A failed system call: which call, and the errno it left, captured once.
package struct SystemError: Error, CustomStringConvertible {
    var call: String
    package var errno: Int32
    /// The path the call failed on, when it is not the one the caller passed (a folder glob(3)
    /// could not list, say).
    package var path: String?

    package init(_ call: String, errno: Int32 = Glibc.errno, path: String? = nil) {
        self.call = call
        self.errno = errno
        self.path = path
    }

    /// The C library's words for the errno (`No such file or directory`).
    package var message: String { String(cString: strerror(errno)) }
    package var description: String { "\(call): \(message)" }

    /// The error as winback reports it: `"<what>: <message>"` with an exit code and a path.
    package func winBack(_ code: WinBackError.Code, _ what: String, path: String? = nil) -> WinBackError {
        WinBackError(code, "\(what): \(message)", path: path)
    }
}

extension SystemError {
    /// `error` in the words a message gives it: the C library's for a failed call, also when
    /// Foundation raised it (`Permission denied`, never an error domain and a code).
    package static func words(_ error: Error) -> String {
        if let e = error as? SystemError { return e.message }
        if let e = error as? WinBackError { return e.description }
        let ns = error as NSError
        if ns.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(ns.code))) }
        if let posix = ns.userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(posix.code)))
        }
        switch CocoaError.Code(rawValue: ns.code) {
        case .fileWriteNoPermission, .fileReadNoPermission: return String(cString: strerror(EACCES))
        case .fileNoSuchFile, .fileReadNoSuchFile: return String(cString: strerror(ENOENT))
        case .fileWriteOutOfSpace: return String(cString: strerror(ENOSPC))
        case .fileWriteVolumeReadOnly: return String(cString: strerror(EROFS))
        default: return ns.domain == NSCocoaErrorDomain ? "the file operation failed" : "\(error)"
        }
    }
}

/// Every system call winback makes on descriptors, files, memory and processes goes through
/// here: calls that can be interrupted are retried on EINTR, and a failure becomes a
/// ``SystemError`` holding the errno of that call. The rest of the library imports no C
/// library for them. A path is a ``FileName``: it is turned into the bytes it stands for only
/// here, at the call (docs/rules.md §6.2).
package enum System {
    // MARK: Descriptors

    /// A file opened to be read.
    static func openForReading(_ path: String) throws -> Int32 { try open(path, O_RDONLY) }

    /// What a path names when it is not a regular file, in words (`a FIFO`).
    package struct NotRegularFile: Error {
        package var what: String
    }

    /// A regular file opened to be read (docs/rules.md §6.1): opened with O_NONBLOCK, so that
    /// a FIFO cannot block the open, then checked with fstat(2); anything but a regular file
    /// (a FIFO, a device, a socket, a folder) throws ``NotRegularFile``. Without `followLinks`
    /// a link is refused too (O_NOFOLLOW). Returns the descriptor and the file's size.
    package static func openRegularFile(_ path: String, followLinks: Bool = true) throws -> (fd: Int32, size: Int) {
        let fd: Int32
        do { fd = try open(path, O_RDONLY | O_NONBLOCK | (followLinks ? 0 : O_NOFOLLOW)) } catch let e as SystemError {
            if e.errno == ELOOP && !followLinks { throw NotRegularFile(what: "a symbolic link") }
            throw e
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = SystemError("fstat")
            closeQuietly(fd)
            throw e
        }
        let type = st.st_mode & S_IFMT
        guard type == S_IFREG else {
            closeQuietly(fd)
            throw NotRegularFile(what: describe(type))
        }
        // Reads of a regular file never block; the flag is cleared so that nothing else sees it.
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        return (fd, Int(st.st_size))
    }

    /// The bytes of the regular file at `path` (a configuration file: the pipeline, the
    /// catalog, the rates), read as ``openRegularFile(_:followLinks:)`` opens it, so that a FIFO
    /// never blocks; nil when nothing is there. Throws ``NotRegularFile`` for anything but a
    /// regular file, a ``SystemError`` when it cannot be read.
    package static func readRegularFile(_ path: String) throws -> [UInt8]? {
        let (fd, size): (Int32, Int)
        do { (fd, size) = try openRegularFile(path) } catch let e as SystemError
            where e.errno == ENOENT || e.errno == ENOTDIR
        {
            return nil
        }
        defer { closeQuietly(fd) }
        var bytes = [UInt8](repeating: 0, count: max(size, 4096))
        var used = 0
        while true {
            if used == bytes.count { bytes += [UInt8](repeating: 0, count: bytes.count) }
            let n = try bytes.withUnsafeMutableBytes {
                try read(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[used...]))
            }
            if n == 0 { break }
            used += n
        }
        bytes.removeSubrange(used...)
        return bytes
    }

    /// A configuration file's bytes (`what`: "pipeline file", "offer catalog"): a configuration
    /// error (78) when it is missing, unreadable, or not a regular file (named for what it is;
    /// a FIFO is never read).
    /// A file larger than `limit` bytes is a configuration error too, found before it is read.
    package static func readConfiguration(
        _ path: String, what: String, naming name: String? = nil, limit: Int = .max
    ) throws -> [UInt8] {
        if limit < .max, let size = fileSize(path), size > limit, kind(path) == .file {
            throw WinBackError(
                .configuration, "is \(size) bytes, more than the \(limit) a \(what) may be (docs/rules.md §6.3)",
                path: name ?? path)
        }
        do {
            if let bytes = try readRegularFile(path) { return bytes }
        } catch let e as NotRegularFile {
            throw WinBackError(
                .configuration,
                "is \(e.what), not \(what.first.map { "aeiou".contains($0) } == true ? "an" : "a") \(what)",
                path: name ?? path)
        } catch {}
        throw WinBackError(.configuration, "\(what) is missing or unreadable", path: name ?? path)
    }

    /// A file type of `st_mode` in words.
    package static func describe(_ type: mode_t) -> String {
        switch type {
        case S_IFDIR: return "a folder"
        case S_IFIFO: return "a FIFO (named pipe)"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        case S_IFLNK: return "a symbolic link"
        case S_IFREG: return "a regular file"
        default: return "not a regular file"
        }
    }

    /// What `path` names, in words, when it is not a regular file (following links); nil for
    /// a regular file or a path that does not exist.
    package static func notRegular(_ path: String) -> String? {
        var st = stat()
        guard FileName.withCString(path, { stat($0, &st) }) == 0 else { return nil }
        let type = st.st_mode & S_IFMT
        return type == S_IFREG ? nil : describe(type)
    }

    /// A file created, or emptied, to be written (mode 0640 before the umask: audiences name
    /// customers). A link at `path` is never followed (O_NOFOLLOW: ELOOP).
    package static func createForWriting(_ path: String) throws -> Int32 {
        try open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: 0o640)
    }

    /// A file that must not exist yet, created to be written (O_EXCL: whatever was planted at
    /// `path`, a link included, makes it fail with EEXIST).
    package static func createNew(_ path: String) throws -> Int32 {
        try open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o640)
    }

    /// A file opened to be read and written, created when missing (lock files); a link at
    /// `path` is refused (ELOOP), and so is anything but a regular file.
    package static func openOrCreate(_ path: String) throws -> Int32 {
        let fd = try open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, mode: 0o600)
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            closeQuietly(fd)
            throw SystemError("open", errno: EINVAL)
        }
        return fd
    }

    /// open(2) with O_CLOEXEC added.
    private static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws -> Int32 {
        while true {
            let fd = FileName.withCString(path) { Glibc.open($0, flags | O_CLOEXEC, mode) }
            if fd >= 0 { return fd }
            if Glibc.errno != EINTR { throw SystemError("open") }
        }
    }

    /// read(2) of up to `buffer.count` bytes; 0 at the end of the file.
    @inline(__always)
    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if Glibc.errno != EINTR { throw SystemError("read") }
        }
    }

    /// The bytes of `fd` from where it stands, until its end or `limit` bytes, whichever comes
    /// first: a file growing meanwhile is not followed further.
    package static func read(_ fd: Int32, upTo limit: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: limit)
        var count = 0
        try bytes.withUnsafeMutableBytes { p in
            while count < limit {
                let n = try read(fd, into: UnsafeMutableRawBufferPointer(rebasing: p[count...]))
                if n == 0 { break }
                count += n
            }
        }
        bytes.removeLast(limit - count)
        return bytes
    }

    /// lseek(2) to `offset` from the start.
    package static func seek(_ fd: Int32, to offset: Int) throws {
        if lseek(fd, off_t(offset), SEEK_SET) < 0 { throw SystemError("lseek") }
    }

    /// write(2) until every byte is written.
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if Glibc.errno == EINTR { continue }
                throw SystemError("write")
            }
            offset += n
        }
    }

    /// fsync(2); returns 0 or the errno (for callers that collect failures).
    package static func fsync(_ fd: Int32) -> Int32 {
        while true {
            if Glibc.fsync(fd) == 0 { return 0 }
            if Glibc.errno != EINTR { return Glibc.errno }
        }
    }

    /// close(2). Never retried: on Linux the descriptor is gone even when it reports EINTR.
    package static func close(_ fd: Int32) throws {
        if Glibc.close(fd) != 0 && Glibc.errno != EINTR { throw SystemError("close") }
    }

    /// close(2), ignoring failure (descriptors of a run that already failed, read-only files).
    package static func closeQuietly(_ fd: Int32) { _ = Glibc.close(fd) }

    /// Takes an exclusive flock(2) without waiting; false when another process holds it.
    package static func tryLock(_ fd: Int32) throws -> Bool {
        while true {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
            switch Glibc.errno {
            case EINTR: continue
            case EWOULDBLOCK: return false
            default: throw SystemError("flock")
            }
        }
    }

    /// Replaces the file's contents with `text`.
    package static func overwrite(_ fd: Int32, with text: String) throws {
        guard ftruncate(fd, 0) == 0 else { throw SystemError("ftruncate") }
        var text = text
        try text.withUTF8 { try writeAll(fd, UnsafeRawBufferPointer($0)) }
    }

    /// Whether the descriptor is a terminal.
    package static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) != 0 }

    // MARK: Paths

    package enum Kind { case missing, file, directory, other }

    /// What `path` names, following links (`lstat` with `followLinks: false`).
    package static func kind(_ path: String, followLinks: Bool = true) -> Kind {
        var st = stat()
        let rc = FileName.withCString(path) { followLinks ? stat($0, &st) : lstat($0, &st) }
        guard rc == 0 else { return .missing }
        switch st.st_mode & S_IFMT {
        case S_IFDIR: return .directory
        case S_IFREG: return .file
        default: return .other
        }
    }

    /// Size in bytes of the file at `path` (following links); nil when it cannot be read.
    package static func fileSize(_ path: String) -> Int? {
        var st = stat()
        return FileName.withCString(path, { stat($0, &st) }) == 0 ? Int(st.st_size) : nil
    }

    /// Whether this process may read `path`.
    package static func isReadable(_ path: String) -> Bool { FileName.withCString(path) { access($0, R_OK) } == 0 }

    /// mkdir(2) of one folder with `mode` (the umask may only take bits away); EEXIST when
    /// anything, a link included, is already there.
    package static func makeDirectory(_ path: String, mode: mode_t) throws {
        if FileName.withCString(path, { Glibc.mkdir($0, mode) }) != 0 { throw SystemError("mkdir") }
    }

    /// Makes folder `path` and any missing folder above it, each with `mode` (less the umask):
    /// never the 0777 a umask of 0 would leave, which anyone could write.
    package static func makeDirectories(_ path: String, mode: mode_t) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + part
            if kind(prefix) == .directory { continue }
            do { try makeDirectory(prefix, mode: mode) } catch let e as SystemError where e.errno == EEXIST {}
        }
    }

    /// The first place on the way to folder `path` where another user could swap what follows:
    /// a folder neither root's nor this user's, or one that all may write, or its group (unless
    /// that group is this user's own, with no other member), without the sticky bit (as /tmp
    /// has); or a link of another user's. The path is walked as given, from `/` down, and each
    /// link on it is followed and its target checked the same way. In words; nil when there is
    /// none, or when the path cannot be examined (whoever uses it then fails with the system's
    /// reason).
    package static func swappableAncestor(_ path: String) -> String? {
        var seen = 0
        return swappable(path, links: &seen)
    }

    private static func swappable(_ path: String, links: inout Int) -> String? {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var prefix = ""
        for place in ["/"]
            + absolute.split(separator: "/").map({ part -> String in
                prefix += "/" + part
                return prefix
            })
        {
            var st = stat()
            guard FileName.withCString(place, { lstat($0, &st) }) == 0 else { return nil }
            if st.st_mode & S_IFMT == S_IFLNK {
                if st.st_uid != 0 && st.st_uid != geteuid() {
                    return "\(place) is a symbolic link of another user's (uid \(st.st_uid))"
                }
                links += 1
                guard links < 40, let target = resolved(place) else { return nil }
                if let why = swappable(target, links: &links) { return why }
                continue
            }
            if st.st_uid != 0 && st.st_uid != geteuid() {
                return "\(place) is owned by another user (uid \(st.st_uid))"
            }
            guard st.st_mode & S_ISVTX == 0 else { continue }
            let mode = String(st.st_mode & 0o7777, radix: 8)
            if st.st_mode & 0o002 != 0 {
                return "\(place) can be written by every user (mode \(mode), not sticky)"
            }
            if st.st_mode & 0o020 != 0 && !isOwnGroup(st.st_gid) {
                return "\(place) can be written by its group \(groupName(st.st_gid)) (mode \(mode), not sticky)"
            }
        }
        return nil
    }

    /// Whether group `gid` is this user's own: its effective group, with no member but this
    /// user (the private group of a system that gives each user one, whose umask is 002).
    private static func isOwnGroup(_ gid: gid_t) -> Bool {
        guard gid == getegid(), let g = getgrgid(gid) else { return false }
        let me = getpwuid(geteuid()).map { String(cString: $0.pointee.pw_name) }
        var i = 0
        while let m = g.pointee.gr_mem[i] {
            if String(cString: m) != me { return false }
            i += 1
        }
        return true
    }

    /// The name of group `gid`, or its number.
    private static func groupName(_ gid: gid_t) -> String {
        getgrgid(gid).map { String(cString: $0.pointee.gr_name) } ?? "\(gid)"
    }

    /// The owner of the link (or file) at `path` itself, not followed; nil when nothing is there.
    package static func linkOwner(_ path: String) -> uid_t? {
        var st = stat()
        return FileName.withCString(path, { lstat($0, &st) }) == 0 ? st.st_uid : nil
    }

    /// `path` with every link resolved (realpath(3)); nil when it cannot be.
    package static func resolved(_ path: String) -> String? {
        guard let r = FileName.withCString(path, { Glibc.realpath($0, nil) }) else { return nil }
        defer { free(r) }
        return FileName.string(cString: r)
    }

    /// A folder of another user's where a run would write (docs/rules.md §6.1).
    package struct OwnedByAnother: Error, CustomStringConvertible {
        package let uid: uid_t
        package var description: String {
            "is owned by another user (uid \(uid)), not by this run's (uid \(geteuid()))"
        }
    }

    /// Sets the mode, and with `group` the group, of the folder at `path`, opened without
    /// following a link (a link there fails with ENOTDIR or ELOOP). Throws ``OwnedByAnother``
    /// when the folder is not this process's user's: its owner could plant links in it, and
    /// even root must not write into it.
    package static func secureDirectory(_ path: String, mode: mode_t, group: gid_t?, anyOwner: Bool = false) throws {
        let fd = try open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        defer { closeQuietly(fd) }
        var st = stat()
        if fstat(fd, &st) != 0 { throw SystemError("fstat") }
        if st.st_uid != geteuid() && !anyOwner { throw OwnedByAnother(uid: st.st_uid) }
        if let group, fchown(fd, uid_t.max, group) != 0 { throw SystemError("fchown") }
        if fchmod(fd, mode) != 0 { throw SystemError("fchmod") }
    }

    /// Gives the file at `path` (never through a link) `mode`, and `group` when given.
    package static func secureFile(_ path: String, mode: mode_t, group: gid_t?) throws {
        let fd = try open(path, O_RDONLY | O_NOFOLLOW)
        defer { closeQuietly(fd) }
        try secure(fd, mode: mode, group: group)
    }

    /// Gives the open file `fd` `mode`, and `group` when given: a file the run creates gets
    /// its mode as it is made, whatever the umask, and is never opened again for it.
    package static func secure(_ fd: Int32, mode: mode_t, group: gid_t?) throws {
        if let group, fchown(fd, uid_t.max, group) != 0 { throw SystemError("fchown") }
        if fchmod(fd, mode) != 0 { throw SystemError("fchmod") }
    }

    /// Whether the file at `path` (not followed if a link) already has `mode` and, when given,
    /// `group`: looked up without opening it.
    package static func hasMode(_ path: String, mode: mode_t, group: gid_t?) -> Bool {
        var st = stat()
        guard FileName.withCString(path, { lstat($0, &st) }) == 0, st.st_mode & S_IFMT == S_IFREG else { return false }
        return st.st_mode & 0o7777 == mode && (group.map { st.st_gid == $0 } ?? true)
    }

    /// The id of group `name`; nil when there is no such group.
    package static func groupID(_ name: String) -> gid_t? {
        var group = group()
        var result: UnsafeMutablePointer<group>? = nil
        var buffer = [CChar](repeating: 0, count: 16384)
        let rc = getgrnam_r(name, &group, &buffer, buffer.count, &result)
        return rc == 0 && result != nil ? group.gr_gid : nil
    }

    /// Why `output.group` `name` cannot be given to a run's files (docs/rules.md §6.3), nil when
    /// it can: the group must exist, and this user must be in it (root may give any group).
    package static func groupProblem(_ name: String) -> String? {
        guard let gid = groupID(name) else { return "output.group: there is no group '\(name)' on this machine" }
        if geteuid() == 0 || getegid() == gid { return nil }
        let n = getgroups(0, nil)
        var groups = [gid_t](repeating: 0, count: Int(max(n, 0)))
        if n > 0, getgroups(n, &groups) == n, groups.contains(gid) { return nil }
        let me = getpwuid(geteuid()).map { String(cString: $0.pointee.pw_name) } ?? "uid \(geteuid())"
        return "output.group: this user (\(me)) is not in the group '\(name)', so it cannot give it the run's "
            + "files; add the user to the group, or choose one of the user's groups"
    }

    /// The file-type bits of `path` itself (a link is not followed), nil when nothing is there.
    package static func linkKind(_ path: String) -> mode_t? {
        var st = stat()
        return FileName.withCString(path, { lstat($0, &st) }) == 0 ? st.st_mode & S_IFMT : nil
    }

    package static let symbolicLinkType = S_IFLNK
    package static let folderType = S_IFDIR

    /// The permission bits of `path` (following links), nil when it cannot be examined.
    static func permissions(_ path: String) -> mode_t? {
        var st = stat()
        return FileName.withCString(path, { stat($0, &st) }) == 0 ? st.st_mode & 0o7777 : nil
    }

    /// What says that the file at `path` (a link followed) is still the one seen before without
    /// reading it: device, inode, size, and modification and change times to the nanosecond.
    /// The change time cannot be set back by a user, so a rewritten file shows a new one.
    /// Nil when it cannot be examined.
    package static func fileIdentity(_ path: String) -> [Int64]? {
        var st = stat()
        guard FileName.withCString(path, { stat($0, &st) }) == 0 else { return nil }
        return [
            Int64(bitPattern: UInt64(st.st_dev)), Int64(bitPattern: UInt64(st.st_ino)), Int64(st.st_size),
            Int64(st.st_mtim.tv_sec), Int64(st.st_mtim.tv_nsec), Int64(st.st_ctim.tv_sec), Int64(st.st_ctim.tv_nsec),
        ]
    }

    /// realpath(3): `path` with every link, `.` and `..` resolved; nil when a component is
    /// missing or cannot be examined.
    package static func realPath(_ path: String) -> String? {
        guard let p = FileName.withCString(path, { Glibc.realpath($0, nil) }) else { return nil }
        defer { free(p) }
        return FileName.string(cString: p)
    }

    /// link(2): a second name `to` for the file at `from` (a link at `from` is not followed).
    package static func link(_ from: String, _ to: String) throws {
        if FileName.withCString(from, { f in FileName.withCString(to) { Glibc.link(f, $0) } }) != 0 {
            throw SystemError("link")
        }
    }

    /// rename(2).
    package static func rename(_ from: String, _ to: String) throws {
        if FileName.withCString(from, { f in FileName.withCString(to) { Glibc.rename(f, $0) } }) != 0 {
            throw SystemError("rename")
        }
    }

    /// unlink(2), ignoring a missing file.
    package static func unlinkIfPresent(_ path: String) { _ = FileName.withCString(path) { unlink($0) } }

    /// symlink(2): `path` pointing at `target`.
    package static func symlink(_ target: String, at path: String) throws {
        if FileName.withCString(target, { t in FileName.withCString(path) { Glibc.symlink(t, $0) } }) != 0 {
            throw SystemError("symlink")
        }
    }

    /// Syncs a folder, so that renames in it are on disk; best effort.
    package static func syncDirectory(_ path: String) {
        guard let fd = try? open(path, O_RDONLY | O_DIRECTORY) else { return }
        _ = fsync(fd)
        closeQuietly(fd)
    }

    /// glob(3) of `pattern`, sorted by glob; [] when nothing matches (a missing folder too). The
    /// pattern and the names found are ``FileName``s: a name that is not UTF-8 is found as it is. A
    /// folder on the way that exists but cannot be listed fails it with a ``SystemError`` whose
    /// `path` is that folder and whose errno is opendir's (glob(3) itself only returns that it
    /// gave up).
    package static func glob(_ pattern: String) throws -> [String] {
        // glob(3) reports a folder it cannot open to a C function, which can capture nothing:
        // it leaves the folder here, one glob at a time.
        globLock.lock()
        defer { globLock.unlock() }
        globFailure = nil
        var g = glob_t()
        defer { globfree(&g) }
        let rc = FileName.withCString(pattern) {
            Glibc.glob(
                $0, 0,
                { folder, error in
                    if error == ENOENT { return 0 }
                    System.globFailure = (folder.map { FileName.string(cString: $0) } ?? "", error)
                    return 1
                }, &g)
        }
        if rc == GLOB_NOMATCH { return [] }
        guard rc == 0 else {
            if let (folder, error) = globFailure { throw SystemError("opendir", errno: error, path: folder) }
            throw SystemError("glob", errno: rc == GLOB_NOSPACE ? ENOMEM : EIO)
        }
        return (0..<Int(g.gl_pathc)).compactMap { i in g.gl_pathv[i].map { FileName.string(cString: $0) } }
    }

    private static let globLock = NSLock()
    /// The folder the running glob could not list, and opendir's errno; guarded by `globLock`.
    nonisolated(unsafe) private static var globFailure: (folder: String, errno: Int32)?

    // MARK: Memory

    /// Bytes of a memory page.
    package static var pageSize: Int { Int(sysconf(Int32(_SC_PAGESIZE))) }

    /// Bytes of physical memory.
    package static var physicalMemory: Int { Int(sysconf(Int32(_SC_PHYS_PAGES))) * pageSize }

    /// A private anonymous mapping of `bytes`; with `reserveOnly`, address space whose pages
    /// exist only once written (MAP_NORESERVE). Nil when the system refuses.
    package static func mapAnonymous(_ bytes: Int, reserveOnly: Bool = false) -> UnsafeMutableRawPointer? {
        let flags = MAP_PRIVATE | MAP_ANONYMOUS | (reserveOnly ? MAP_NORESERVE : 0)
        let p = mmap(nil, bytes, PROT_READ | PROT_WRITE, flags, -1, 0)
        return p == MAP_FAILED ? nil : p
    }

    /// munmap(2).
    package static func unmap(_ p: UnsafeMutableRawPointer, _ bytes: Int) { _ = munmap(p, bytes) }

    /// Makes the pages of `bytes` at `p` (a private anonymous mapping) memory at once, ready to
    /// be written (madvise(2) MADV_POPULATE_WRITE), rather than one fault per page as each is
    /// first written. A system without it (before Linux 5.14) faults them in as before.
    package static func populate(_ p: UnsafeMutableRawPointer, _ bytes: Int) {
        _ = madvise(p, bytes, MADV_POPULATE_WRITE)
    }

    /// Hands the pages of `bytes` at `p` back to the system (they read as zero if touched again).
    @discardableResult
    package static func release(_ p: UnsafeMutableRawPointer, _ bytes: Int) -> Bool {
        madvise(p, bytes, MADV_DONTNEED) == 0
    }

    /// Unmaps the pages of `start..<end` of this process's address space (madvise(2)
    /// MADV_DONTNEED): for a read-only mapping of a file, they are read again from the page
    /// cache when next touched. Never for a writable or anonymous mapping, whose contents
    /// would be lost.
    package static func unmapPages(_ start: Int, _ end: Int) -> Bool {
        guard let p = UnsafeMutableRawPointer(bitPattern: start), end > start else { return false }
        return release(p, end - start)
    }

    /// The bytes of a file the system makes as it is read (/proc), whatever size it reports;
    /// nil when it cannot be opened. Foundation's `String(contentsOfFile:)` stops after the
    /// first read of such a file: 3,784 of /proc/self/smaps's 78,059 bytes.
    package static func readGenerated(_ path: String) -> [UInt8]? {
        guard let fd = try? openForReading(path) else { return nil }
        defer { closeQuietly(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { (try? read(fd, into: $0)) ?? -1 }
            if n < 0 { return nil }
            if n == 0 { return bytes }
            bytes += chunk[..<n]
        }
    }

    /// The most memory this process has held resident so far, in bytes (getrusage(2)).
    package static var peakResidentBytes: Int {
        var usage = rusage()
        return getrusage(RUSAGE_SELF.rawValue, &usage) == 0 ? Int(usage.ru_maxrss) * 1024 : 0
    }

    // MARK: Processes

    /// This process's id.
    package static var processID: Int32 { getpid() }

    /// Runs `executable` with `args`, its stdout sent to /dev/null, and waits for it; returns
    /// its wait status, peak resident memory in bytes and CPU seconds (user and system).
    package static func spawnAndWait(
        _ executable: String, _ args: [String]
    ) throws -> (status: Int32, peakRSSBytes: Int, cpuSeconds: Double) {
        var pid: pid_t = 0
        let argv = ([executable] + args).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard rc == 0 else { throw SystemError("posix_spawn", errno: rc) }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            if Glibc.errno != EINTR { throw SystemError("wait4") }
        }
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return (status, Int(usage.ru_maxrss) * 1024, seconds(usage.ru_utime) + seconds(usage.ru_stime))
    }
}

/// A name's bytes to and from the C strings of the system calls above: only they pass names
/// through the C library.
extension FileName {
    /// The name of a C string the system returned.
    package static func string(cString p: UnsafePointer<CChar>) -> String {
        string(fromBytes: UnsafeRawBufferPointer(start: p, count: strlen(p)))
    }

    /// Calls `body` with the name's bytes as a C string: for the system calls of ``System``.
    package static func withCString<R>(_ name: String, _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        guard mayHoldMarkers(name) else { return try name.withCString(body) }
        var b = bytes(name)
        b.append(0)
        return try b.withUnsafeBytes { try body($0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
    }
}
