import Foundation

/// Date parsing and formatting for signature headers, done by hand so that it is pure,
/// locale-independent and needs no shared `DateFormatter`.
public enum SignatureDates {
    /// `20130524T000000Z` (SigV4 `x-amz-date`, OSS V4 `x-oss-date`).
    public static func parseISO8601Basic(_ string: String) -> Date? {
        let c = Array(string.utf8)
        guard c.count == 16, c[8] == UInt8(ascii: "T"), c[15] == UInt8(ascii: "Z"),
              let year = number(c[0..<4]), let month = number(c[4..<6]), let day = number(c[6..<8]),
              let hour = number(c[9..<11]), let minute = number(c[11..<13]), let second = number(c[13..<15])
        else { return nil }
        return make(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// RFC 7231 IMF-fixdate, `Fri, 24 May 2013 00:00:00 GMT` (the `Date` header); also accepts
    /// the obsolete RFC 850 form `Friday, 24-May-13 00:00:00 GMT`.
    public static func parseHTTPDate(_ string: String) -> Date? {
        let trimmed = string.trimmingCharacters(in: .whitespaces)
        guard let comma = trimmed.firstIndex(of: ",") else { return nil }
        let rest = trimmed[trimmed.index(after: comma)...].split(separator: " ", omittingEmptySubsequences: true)
        var day: Int?, month: Int?, year: Int?, time: Substring?, zone: Substring?
        if rest.count == 5 {
            day = Int(rest[0]); month = months.firstIndex(of: rest[1].lowercased()).map { $0 + 1 }
            year = Int(rest[2]); time = rest[3]; zone = rest[4]
        } else if rest.count == 3 {
            let parts = rest[0].split(separator: "-")
            guard parts.count == 3 else { return nil }
            day = Int(parts[0]); month = months.firstIndex(of: parts[1].lowercased()).map { $0 + 1 }
            year = Int(parts[2]).map { $0 < 70 ? 2000 + $0 : ($0 < 100 ? 1900 + $0 : $0) }
            time = rest[1]; zone = rest[2]
        } else {
            return nil
        }
        guard let day, let month, let year, let time, zone == "GMT" || zone == "UTC" else { return nil }
        let hms = time.split(separator: ":")
        guard hms.count == 3, let h = Int(hms[0]), let m = Int(hms[1]), let s = Int(hms[2]) else { return nil }
        return make(year: year, month: month, day: day, hour: h, minute: m, second: s)
    }

    /// `2013-05-24T00:00:00Z`, the form S3 and OSS use for ServerTime/RequestTime in errors.
    public static func formatISO8601(_ date: Date) -> String {
        let (y, mo, d, h, mi, s) = components(date)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", y, mo, d, h, mi, s)
    }

    /// `20130524T000000Z`.
    public static func formatISO8601Basic(_ date: Date) -> String {
        let (y, mo, d, h, mi, s) = components(date)
        return String(format: "%04d%02d%02dT%02d%02d%02dZ", y, mo, d, h, mi, s)
    }

    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for c in digits {
            guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(c - UInt8(ascii: "0"))
        }
        return value
    }

    private static func make(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Date? {
        guard (1...12).contains(month), (1...31).contains(day), (0...23).contains(hour),
              (0...59).contains(minute), (0...60).contains(second), (1970...9999).contains(year)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86400 + hour * 3600 + minute * 60 + second))
    }

    // Howard Hinnant's days_from_civil / civil_from_days.
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    private static func components(_ date: Date) -> (Int, Int, Int, Int, Int, Int) {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        var days = total / 86400
        var secs = total % 86400
        if secs < 0 { secs += 86400; days -= 1 }
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        return (y, m, d, secs / 3600, secs % 3600 / 60, secs % 60)
    }
}
