import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a helper program (`openssl speed`, a Python peer) to completion and returns its stdout, or
/// throws once `deadline` has passed (the child is then killed). The child starts with an empty
/// signal mask and every signal at its default action, whatever thread spawns it: Swift's task
/// pool and Dispatch threads block most signals, and a child inherits its parent thread's mask
/// through exec — `openssl speed -seconds N` then never sees its SIGALRM and loops forever.
/// stdin and stderr are /dev/null.
public enum ChildProcess {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    public static func run(_ executable: String, _ arguments: [String], deadline: Duration) throws -> String {
        let end = ContinuousClock.now + deadline
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw Failure(description: "pipe: errno \(errno)") }
        // Not inherited by other children (the dup2 below gives this one its stdout).
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        defer { close(fds[0]) }

        let spawned = spawn(executable, arguments) { actions in
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        close(fds[1])
        let pid = try spawned.get()

        func killAndThrow() throws -> Never {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw Failure(description: "\(arguments.first ?? executable) still running after its deadline (\(deadline)): killed")
        }
        func millisecondsLeft() -> Int32 {
            let left = (end - ContinuousClock.now).components
            return Int32(clamping: max(0, left.seconds * 1000 + left.attoseconds / 1_000_000_000_000_000))
        }

        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            var ready = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            let left = millisecondsLeft()
            if left == 0 { try killAndThrow() }
            let polled = poll(&ready, 1, left)
            if polled < 0, errno == EINTR { continue }
            if polled == 0 { continue }  // the deadline is checked at the top
            let n = buffer.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            output += buffer[0..<n]
        }
        // stdout closed: the child is exiting; it still answers within the deadline or is killed.
        var status: Int32 = 0
        while true {
            let waited = waitpid(pid, &status, WNOHANG)
            if waited == pid { break }
            if waited < 0, errno != EINTR { throw Failure(description: "waitpid: errno \(errno)") }
            if millisecondsLeft() == 0 { try killAndThrow() }
            usleep(10_000)
        }
        let exited = status & 0x7F == 0
        guard exited, (status >> 8) & 0xFF == 0 else {
            throw Failure(description: "\(arguments.first ?? executable) "
                + (exited ? "exited with \((status >> 8) & 0xFF)" : "killed by signal \(status & 0x7F)"))
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Starts a long-running helper (a gateway a benchmark measures apart from its client) with
    /// stdout and stderr appended to `output`, and returns its pid: the caller stops and reaps it.
    public static func start(_ executable: String, _ arguments: [String], output: String) throws -> pid_t {
        try spawn(executable, arguments) { actions in
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }.get()
    }

    /// posix_spawn with a clean signal mask and default signal actions (see above).
    private static func spawn(_ executable: String, _ arguments: [String],
                              files: (inout posix_spawn_file_actions_t) -> Void) -> Result<pid_t, Failure> {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        files(&actions)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard spawned == 0 else { return .failure(Failure(description: "\(executable): posix_spawn errno \(spawned)")) }
        return .success(pid)
    }
}
