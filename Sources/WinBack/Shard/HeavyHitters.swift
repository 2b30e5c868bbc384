/// The most frequent keys of a stream in constant memory: Metwally, Agrawal and El Abbadi's
/// Space-Saving sketch. Any key seen more than n / capacity times of n is kept, with a count
/// that overestimates it by at most n / capacity.
struct HeavyHitters {
    private var counts: [String: Int] = [:]
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    mutating func add(_ key: String) {
        if let c = counts[key] {
            counts[key] = c + 1
        } else if counts.count < capacity {
            counts[key] = 1
        } else {
            // The least counted key gives its place, its count carried over.
            let (victim, least) = counts.min { ($0.value, $0.key) < ($1.value, $1.key) }!
            counts[victim] = nil
            counts[key] = least + 1
        }
    }

    /// The key counted most, with its count (ties: the smaller key).
    var top: (String, Int)? {
        counts.min { ($1.value, $0.key) < ($0.value, $1.key) }.map { ($0.key, $0.value) }
    }
}
