import Foundation

/// Every date form Tollgate reads or writes on the wire, parsed and formatted by hand: pure,
/// locale-independent, no `DateFormatter` (signature dates are parsed on every request).
/// All times are UTC.
///
/// | Form | Example | Used for |
/// |---|---|---|
/// | ISO 8601 basic | `20130524T000000Z` | `x-amz-date`, `x-oss-date`, presigned `X-Amz-Date` |
/// | IMF-fixdate (RFC 1123) | `Fri, 24 May 2013 00:00:00 GMT` | `Date`, `Last-Modified`, `If-Modified-Since` |
/// | RFC 850, asctime | `Friday, 24-May-13 00:00:00 GMT`, `Fri May 24 00:00:00 2013` | HTTP dates, read only |
/// | ISO 8601 extended | `2013-05-24T00:00:00Z` | token `Expiration`, error `ServerTime`, policy values |
/// | with milliseconds | `2013-05-24T00:00:00.000Z` | XML `LastModified`, log lines |
public enum WireDate {
    // MARK: Parsing

    /// `20130524T000000Z`; nil for anything else.
    public static func parseISO8601Basic(_ string: String) -> Date? {
        var string = string
        return string.withUTF8 { c -> Date? in
            guard c.count == 16, c[8] == UInt8(ascii: "T"), c[15] == UInt8(ascii: "Z"),
                  let year = digits(c, 0, 4), let month = digits(c, 4, 2), let day = digits(c, 6, 2),
                  let hour = digits(c, 9, 2), let minute = digits(c, 11, 2), let second = digits(c, 13, 2)
            else { return nil }
            return date(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        }
    }

    /// An HTTP date in any of the three forms RFC 9110 (§5.6.7) requires recipients to accept:
    /// IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT` and
    /// asctime `Sun Nov  6 08:49:37 1994`. Month names in any case; `UTC` is taken for `GMT`;
    /// the weekday is not checked against the date. A two-digit RFC 850 year below 70 is 20xx.
    public static func parseHTTPDate(_ string: String) -> Date? {
        let fields = string.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let first = fields.first else { return nil }
        if first.hasSuffix(",") {
            if fields.count == 6 {
                // IMF-fixdate: day month year time zone.
                guard let day = number(fields[1], 1...2), let month = month(fields[2]),
                      let year = number(fields[3], 4...4), isGMT(fields[5]) else { return nil }
                return date(year: year, month: month, day: day, time: fields[4])
            }
            if fields.count == 4 {
                // RFC 850: day-month-year time zone.
                let parts = fields[1].split(separator: "-", omittingEmptySubsequences: false)
                guard parts.count == 3, let day = number(parts[0], 1...2), let month = month(parts[1]),
                      var year = number(parts[2], 2...4), isGMT(fields[3]) else { return nil }
                if parts[2].utf8.count == 2 { year += year < 70 ? 2000 : 1900 }
                return date(year: year, month: month, day: day, time: fields[2])
            }
            return nil
        }
        // asctime: weekday month day time year.
        guard fields.count == 5, let month = month(fields[1]), let day = number(fields[2], 1...2),
              let year = number(fields[4], 4...4) else { return nil }
        return date(year: year, month: month, day: day, time: fields[3])
    }

    /// ISO 8601 extended, in seconds since the epoch (fractions kept): `2026-01-02`,
    /// `2026-01-02T03:04:05Z`, with fractional seconds, `t` or a space for `T`, `z` for `Z`, or a
    /// `±hh:mm`/`±hhmm`/`±hh` offset. A time needs a zone. nil for anything else.
    public static func parseISO8601(_ string: String) -> Double? {
        var string = string
        return string.withUTF8 { b -> Double? in
            guard b.count >= 10, let y = digits(b, 0, 4), b[4] == UInt8(ascii: "-"), let mo = digits(b, 5, 2),
                  b[7] == UInt8(ascii: "-"), let d = digits(b, 8, 2), (1...12).contains(mo), d >= 1, d <= daysIn(month: mo, year: y)
            else { return nil }
            var h = 0, mi = 0, sec = 0.0, offset = 0
            var i = 10
            if i < b.count {
                guard b[i] == UInt8(ascii: "T") || b[i] == UInt8(ascii: "t") || b[i] == UInt8(ascii: " "),
                      let hh = digits(b, i + 1, 2), i + 3 < b.count, b[i + 3] == UInt8(ascii: ":"), let mm = digits(b, i + 4, 2)
                else { return nil }
                h = hh
                mi = mm
                i += 6
                if i < b.count && b[i] == UInt8(ascii: ":") {
                    guard let ss = digits(b, i + 1, 2) else { return nil }
                    sec = Double(ss)
                    i += 3
                    if i < b.count && b[i] == UInt8(ascii: ".") {
                        var k = i + 1
                        var fraction = 0.0, scale = 0.1
                        while k < b.count, let digit = digitValue(b[k]) {
                            fraction += Double(digit) * scale
                            scale /= 10
                            k += 1
                        }
                        guard k > i + 1 else { return nil }
                        sec += fraction
                        i = k
                    }
                }
                guard h < 24, mi < 60, sec < 61, i < b.count else { return nil }
                if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
                    i += 1
                } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
                    let east = b[i] == UInt8(ascii: "+")
                    guard let oh = digits(b, i + 1, 2), oh < 24 else { return nil }
                    var om = 0
                    if i + 3 < b.count && b[i + 3] == UInt8(ascii: ":") {
                        guard let m = digits(b, i + 4, 2) else { return nil }
                        om = m
                        i += 6
                    } else if let m = digits(b, i + 3, 2) {
                        om = m
                        i += 5
                    } else {
                        i += 3
                    }
                    guard om < 60 else { return nil }
                    // Local time east of UTC is ahead of it: subtract the offset.
                    offset = (oh * 3600 + om * 60) * (east ? -1 : 1)
                } else {
                    return nil
                }
                guard i == b.count else { return nil }
            }
            return Double(daysFromCivil(year: y, month: mo, day: d) * 86400 + h * 3600 + mi * 60 + offset) + sec
        }
    }

    // MARK: Formatting

    /// `20130524T000000Z`.
    public static func iso8601Basic(_ date: Date) -> String {
        let t = Civil(seconds: wholeSeconds(date))
        var out: [UInt8] = []
        out.reserveCapacity(16)
        append(t.year, 4, to: &out)
        append(t.month, 2, to: &out)
        append(t.day, 2, to: &out)
        out.append(UInt8(ascii: "T"))
        append(t.hour, 2, to: &out)
        append(t.minute, 2, to: &out)
        append(t.second, 2, to: &out)
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    /// IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT` (every GET and HEAD writes one, and every
    /// object answer its Last-Modified): 29 bytes written in place for the years 0 to 9999.
    public static func httpDate(_ date: Date) -> String {
        let t = Civil(seconds: wholeSeconds(date))
        guard (0...9999).contains(t.year) else { return httpDateOfAnyYear(t) }
        return String(unsafeUninitializedCapacity: 29) { out in
            func put(_ text: StaticString, at offset: Int) {
                for index in 0..<text.utf8CodeUnitCount { out[offset + index] = text.utf8Start[index] }
            }
            func put(_ value: Int, digits: Int, at offset: Int) {
                var value = value
                for index in stride(from: offset + digits - 1, through: offset, by: -1) {
                    out[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            for index in 0..<3 {
                out[index] = weekdayLetters[t.weekday * 3 + index]
                out[8 + index] = monthLetters[(t.month - 1) * 3 + index]
            }
            put(", ", at: 3)
            put(t.day, digits: 2, at: 5)
            put(" ", at: 7)
            put(" ", at: 11)
            put(t.year, digits: 4, at: 12)
            put(" ", at: 16)
            put(t.hour, digits: 2, at: 17)
            put(":", at: 19)
            put(t.minute, digits: 2, at: 20)
            put(":", at: 22)
            put(t.second, digits: 2, at: 23)
            put(" GMT", at: 25)
            return 29
        }
    }

    /// The same for a year of any number of digits, or before year 0.
    private static func httpDateOfAnyYear(_ t: Civil) -> String {
        var out: [UInt8] = []
        out += weekdays[t.weekday].utf8
        out += ", ".utf8
        append(t.day, 2, to: &out)
        out.append(UInt8(ascii: " "))
        out += months[t.month - 1].utf8
        out.append(UInt8(ascii: " "))
        append(t.year, 4, to: &out)
        out.append(UInt8(ascii: " "))
        append(t.hour, 2, to: &out)
        out.append(UInt8(ascii: ":"))
        append(t.minute, 2, to: &out)
        out.append(UInt8(ascii: ":"))
        append(t.second, 2, to: &out)
        out += " GMT".utf8
        return String(decoding: out, as: UTF8.self)
    }

    /// ISO 8601 extended, `2013-05-24T00:00:00Z`, or with `milliseconds` `…00:00:00.000Z`.
    /// The second is rounded down.
    public static func iso8601(_ date: Date, milliseconds: Int? = nil) -> String {
        iso8601(wholeSeconds(date), milliseconds: milliseconds)
    }

    public static func iso8601(_ seconds: Int64, milliseconds: Int? = nil) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(24)
        appendISO8601(seconds, milliseconds: milliseconds, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The same, appended to `out` (log lines). Years past 9999 get more digits.
    public static func appendISO8601(_ seconds: Int64, milliseconds: Int?, to out: inout [UInt8]) {
        let t = Civil(seconds: seconds)
        append(t.year, 4, to: &out)
        out.append(UInt8(ascii: "-"))
        append(t.month, 2, to: &out)
        out.append(UInt8(ascii: "-"))
        append(t.day, 2, to: &out)
        out.append(UInt8(ascii: "T"))
        append(t.hour, 2, to: &out)
        out.append(UInt8(ascii: ":"))
        append(t.minute, 2, to: &out)
        out.append(UInt8(ascii: ":"))
        append(t.second, 2, to: &out)
        if let milliseconds {
            out.append(UInt8(ascii: "."))
            append(milliseconds, 3, to: &out)
        }
        out.append(UInt8(ascii: "Z"))
    }

    // MARK: Calendar arithmetic

    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let weekdayLetters = Array(weekdays.joined().utf8)
    private static let monthLetters = Array(months.joined().utf8)

    private static func wholeSeconds(_ date: Date) -> Int64 {
        Int64(date.timeIntervalSince1970.rounded(.down))
    }

    /// A UTC second broken into its calendar fields (Howard Hinnant's `civil_from_days`).
    private struct Civil {
        var year, month, day, hour, minute, second, weekday: Int

        init(seconds: Int64) {
            var days = Int(seconds / 86400)
            var rest = Int(seconds % 86400)
            if rest < 0 { rest += 86400; days -= 1 }
            let z = days + 719468
            let era = (z >= 0 ? z : z - 146096) / 146097
            let doe = z - era * 146097
            let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
            let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
            let mp = (5 * doy + 2) / 153
            day = doy - (153 * mp + 2) / 5 + 1
            month = mp < 10 ? mp + 3 : mp - 9
            year = yoe + era * 400 + (month <= 2 ? 1 : 0)
            hour = rest / 3600
            minute = rest % 3600 / 60
            second = rest % 60
            // 1970-01-01 was a Thursday.
            weekday = ((days % 7) + 11) % 7
        }
    }

    /// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    private static func date(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Date? {
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), (0...23).contains(hour),
              (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86400 + hour * 3600 + minute * 60 + second))
    }

    /// `HH:MM:SS` (one or two digits each) completes a date.
    private static func date(year: Int, month: Int, day: Int, time: Substring) -> Date? {
        let parts = time.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let hour = number(parts[0], 1...2), let minute = number(parts[1], 1...2),
              let second = number(parts[2], 1...2) else { return nil }
        return date(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    // MARK: Fields

    private static func isGMT(_ zone: Substring) -> Bool { zone == "GMT" || zone == "UTC" }

    /// `Jan`…`Dec`, any case, as 1…12.
    private static func month(_ name: Substring) -> Int? {
        guard name.utf8.count == 3 else { return nil }
        return monthKeys.firstIndex(of: monthKey(name.utf8)).map { $0 + 1 }
    }

    /// Three letters as one number, case folded: what `month` compares.
    private static func monthKey(_ letters: some Sequence<UInt8>) -> UInt32 {
        letters.reduce(0) { $0 << 8 | UInt32($1 | 0x20) }
    }

    private static let monthKeys = months.map { monthKey($0.utf8) }

    /// A decimal of `width` digits and nothing else.
    private static func number(_ text: Substring, _ width: ClosedRange<Int>) -> Int? {
        guard width.contains(text.utf8.count) else { return nil }
        var value = 0
        for c in text.utf8 {
            guard let digit = digitValue(c) else { return nil }
            value = value * 10 + digit
        }
        return value
    }

    private static func digits(_ bytes: UnsafeBufferPointer<UInt8>, _ at: Int, _ count: Int) -> Int? {
        guard at + count <= bytes.count else { return nil }
        var value = 0
        for index in at..<(at + count) {
            guard let digit = digitValue(bytes[index]) else { return nil }
            value = value * 10 + digit
        }
        return value
    }

    @inline(__always)
    private static func digitValue(_ c: UInt8) -> Int? {
        c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") ? Int(c - UInt8(ascii: "0")) : nil
    }

    /// `value` in at least `width` digits, zero-padded. Every log line and token formats dates:
    /// the digits come from constant divisors (multiplications), not a loop of divisions.
    private static func append(_ value: Int, _ width: Int, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        appendDigits(value.magnitude, width, to: &out)
    }

    private static func appendDigits(_ value: UInt, _ width: Int, to out: inout [UInt8]) {
        if value >= 10 || width > 1 { appendDigits(value / 10, width - 1, to: &out) }
        out.append(UInt8(ascii: "0") + UInt8(value % 10))
    }
}
