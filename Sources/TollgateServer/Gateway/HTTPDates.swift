import Foundation

/// The two date formats of S3 and OSS: RFC 1123 in headers, ISO 8601 with milliseconds in XML.
enum HTTPDates {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func parts(_ date: Date) -> tm {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        return parts
    }

    private static func pad(_ n: Int32, _ width: Int = 2) -> String {
        let digits = String(n)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT` (every GET and HEAD writes one: no intermediate strings).
    static func rfc1123(_ date: Date) -> String {
        let t = parts(date)
        var out: [UInt8] = []
        out.reserveCapacity(29)
        out += days[Int(t.tm_wday)].utf8
        out += ", ".utf8
        appendDigits(Int(t.tm_mday), 2, to: &out)
        out.append(UInt8(ascii: " "))
        out += months[Int(t.tm_mon)].utf8
        out.append(UInt8(ascii: " "))
        appendDigits(Int(t.tm_year) + 1900, 4, to: &out)
        out.append(UInt8(ascii: " "))
        appendDigits(Int(t.tm_hour), 2, to: &out)
        out.append(UInt8(ascii: ":"))
        appendDigits(Int(t.tm_min), 2, to: &out)
        out.append(UInt8(ascii: ":"))
        appendDigits(Int(t.tm_sec), 2, to: &out)
        out += " GMT".utf8
        return String(decoding: out, as: UTF8.self)
    }

    private static func appendDigits(_ value: Int, _ width: Int, to out: inout [UInt8]) {
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8((rest / divisor) % 10))
            rest %= divisor
            divisor /= 10
        }
    }

    /// `2009-10-12T17:50:30.000Z`: whole seconds, as both services write it and as oss2's
    /// parser insists (it accepts only `.000Z`); the same second as `Last-Modified`.
    static func iso8601(_ date: Date) -> String {
        let t = parts(date)
        return "\(t.tm_year + 1900)-\(pad(t.tm_mon + 1))-\(pad(t.tm_mday))T\(pad(t.tm_hour)):\(pad(t.tm_min)):\(pad(t.tm_sec)).000Z"
    }

    /// Parses an RFC 1123 date (`Sun, 06 Nov 1994 08:49:37 GMT`) or ISO 8601; nil otherwise.
    static func parse(_ value: String) -> Date? {
        let fields = value.split(separator: " ", omittingEmptySubsequences: true)
        if fields.count == 6, fields[5] == "GMT" || fields[5] == "UTC",
           let day = Int32(fields[1]), let monthIndex = months.firstIndex(of: String(fields[2])), let year = Int32(fields[3]) {
            let clock = fields[4].split(separator: ":")
            if clock.count == 3, let hour = Int32(clock[0]), let minute = Int32(clock[1]), let second = Int32(clock[2]),
               (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) {
                var t = tm()
                t.tm_year = year - 1900
                t.tm_mon = Int32(monthIndex)
                t.tm_mday = day
                t.tm_hour = hour
                t.tm_min = minute
                t.tm_sec = second
                return Date(timeIntervalSince1970: TimeInterval(timegm(&t)))
            }
        }
        return try? Date(value.trimmingCharacters(in: .whitespaces), strategy: .iso8601)
    }
}
