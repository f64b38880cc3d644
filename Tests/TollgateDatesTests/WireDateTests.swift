import Foundation
import Testing
import TollgateDates

/// One table per direction: every wire form Tollgate reads, and every form it writes.
@Suite struct WireDateTests {
    static let may24 = Date(timeIntervalSince1970: 1_369_353_600) // 2013-05-24T00:00:00Z
    static let nov6 = Date(timeIntervalSince1970: 784_111_777) // 1994-11-06T08:49:37Z

    enum Form: String, Sendable { case basic, http, iso }

    static let parses: [(Form, String, Double?)] = [
        // ISO 8601 basic (x-amz-date, x-oss-date)
        (.basic, "20130524T000000Z", 1_369_353_600),
        (.basic, "20240229T235960Z", 1_709_251_200),
        (.basic, "20131324T000000Z", nil),
        (.basic, "20130230T000000Z", nil),
        (.basic, "20130524T240000Z", nil),
        (.basic, "20130524T000000", nil),
        (.basic, "20130524 000000Z", nil),
        (.basic, "2013052aT000000Z", nil),
        (.basic, "", nil),
        // HTTP dates: IMF-fixdate, RFC 850, asctime
        (.http, "Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777),
        (.http, "  Sun, 06 Nov 1994 08:49:37 GMT ", 784_111_777),
        (.http, "Sun, 06 nov 1994 08:49:37 UTC", 784_111_777),
        (.http, "Sun, 06 NOV 1994 08:49:37 GMT", 784_111_777),
        (.http, "Sun, 06 N0v 1994 08:49:37 GMT", nil),
        (.http, "Sun, 06 Nove 1994 08:49:37 GMT", nil),
        (.http, "Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),
        (.http, "Friday, 24-May-13 00:00:00 GMT", 1_369_353_600),
        (.http, "Sun Nov  6 08:49:37 1994", 784_111_777),
        (.http, "Sun Nov 06 08:49:37 1994", 784_111_777),
        (.http, "Fri, 24 May 2013 00:00:00 PST", nil),
        (.http, "Sun, 32 Nov 1994 08:49:37 GMT", nil),
        (.http, "Sun, 06 Nov 1994 25:49:37 GMT", nil),
        (.http, "Sun, 06 Foo 1994 08:49:37 GMT", nil),
        (.http, "Sun, 06 Nov 94 08:49:37 GMT", nil),
        (.http, "1994-11-06T08:49:37Z", nil),
        (.http, "yesterday", nil),
        (.http, "", nil),
        // ISO 8601 extended (token Expiration, policy dates)
        (.iso, "2013-05-24T00:00:00Z", 1_369_353_600),
        (.iso, "2013-05-24", 1_369_353_600),
        (.iso, "2013-05-24t00:00:00z", 1_369_353_600),
        (.iso, "2013-05-24 00:00:00Z", 1_369_353_600),
        (.iso, "2013-05-24T00:00:00.250Z", 1_369_353_600.25),
        (.iso, "2013-05-24T00:00Z", 1_369_353_600),
        (.iso, "2013-05-24T02:00:00+02:00", 1_369_353_600),
        (.iso, "2013-05-23T22:00:00-0200", 1_369_353_600),
        (.iso, "2013-05-24T01:00:00+01", 1_369_353_600),
        (.iso, "2013-05-24T00:00:00", nil),
        (.iso, "2013-02-29", nil),
        (.iso, "2013-05-24T00:00:00.Z", nil),
        (.iso, "2013-05-24T00:00:00Zjunk", nil),
        (.iso, "20130524T000000Z", nil),
    ]

    @Test("parses each wire form", arguments: parses.indices)
    func parse(_ index: Int) {
        let (form, text, expected) = Self.parses[index]
        let parsed: Double? = switch form {
        case .basic: WireDate.parseISO8601Basic(text)?.timeIntervalSince1970
        case .http: WireDate.parseHTTPDate(text)?.timeIntervalSince1970
        case .iso: WireDate.parseISO8601(text)
        }
        #expect(parsed == expected, "\(form) \(text)")
    }

    static let formats: [(String, String)] = [
        (WireDate.iso8601Basic(may24), "20130524T000000Z"),
        (WireDate.iso8601Basic(Date(timeIntervalSince1970: 1_700_000_000.9)), "20231114T221320Z"),
        (WireDate.httpDate(nov6), "Sun, 06 Nov 1994 08:49:37 GMT"),
        (WireDate.httpDate(Date(timeIntervalSince1970: 0)), "Thu, 01 Jan 1970 00:00:00 GMT"),
        (WireDate.httpDate(Date(timeIntervalSince1970: 951_782_400)), "Tue, 29 Feb 2000 00:00:00 GMT"),
        (WireDate.httpDate(Date(timeIntervalSince1970: -1)), "Wed, 31 Dec 1969 23:59:59 GMT"),
        (WireDate.httpDate(Date(timeIntervalSince1970: 1_795_000_000.5)), "Wed, 18 Nov 2026 11:06:40 GMT"),
        (WireDate.httpDate(Date(timeIntervalSince1970: 253_402_300_799)), "Fri, 31 Dec 9999 23:59:59 GMT"),
        (WireDate.httpDate(Date(timeIntervalSince1970: 253_402_300_800)), "Sat, 01 Jan 10000 00:00:00 GMT"),
        (WireDate.httpDate(Date(timeIntervalSince1970: -62_135_683_200)), "Sun, 31 Dec 0000 00:00:00 GMT"),
        (WireDate.iso8601(Date(timeIntervalSince1970: 1_700_000_000)), "2023-11-14T22:13:20Z"),
        (WireDate.iso8601(0), "1970-01-01T00:00:00Z"),
        (WireDate.iso8601(1_795_000_000), "2026-11-18T11:06:40Z"),
        (WireDate.iso8601(253_402_300_799), "9999-12-31T23:59:59Z"),
        (WireDate.iso8601(253_402_300_800), "10000-01-01T00:00:00Z"),
        (WireDate.iso8601(Date(timeIntervalSince1970: 1.999)), "1970-01-01T00:00:01Z"),
        (WireDate.iso8601(Date(timeIntervalSince1970: 784_111_777.25), milliseconds: 0), "1994-11-06T08:49:37.000Z"),
        (WireDate.iso8601(1_795_000_000, milliseconds: 7), "2026-11-18T11:06:40.007Z"),
        (WireDate.iso8601(1_795_000_000, milliseconds: 999), "2026-11-18T11:06:40.999Z"),
    ]

    @Test("formats each wire form", arguments: formats.indices)
    func format(_ index: Int) {
        #expect(Self.formats[index].0 == Self.formats[index].1)
    }

    @Test("what is written reads back, every day for 30 years")
    func roundTrip() {
        for day in stride(from: Int64(0), to: 30 * 366, by: 1) {
            let seconds = 946_684_800 + day * 86400 + (day * 7919) % 86400
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            #expect(WireDate.parseISO8601Basic(WireDate.iso8601Basic(date)) == date)
            #expect(WireDate.parseHTTPDate(WireDate.httpDate(date)) == date)
            #expect(WireDate.parseISO8601(WireDate.iso8601(seconds)) == Double(seconds))
        }
    }
}
