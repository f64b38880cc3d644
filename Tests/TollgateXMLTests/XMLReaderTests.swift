import Testing
@testable import TollgateXML

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
private let loose = XMLLimits(maxBytes: 1 << 20, maxDepth: 8, maxElements: 1000)

@Test func deleteRequestReadsKeysVersionsAndQuiet() throws {
    let xml = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!-- a comment before the root -->
        <Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet> TRUE </Quiet>
        <Object><Key>a &amp; b &lt;&#x41;&#66;&gt;</Key></Object>
        <Object><Key><![CDATA[../x<&>]]></Key><VersionId>null</VersionId></Object>
        <s3:Object xmlns:s3="urn:x"><s3:Key>  spaced  </s3:Key></s3:Object></Delete>
        """
    let request = try DeleteObjectsRequest.parse(bytes(xml))
    #expect(request.quiet)
    #expect(request.keys == ["a & b <AB>", "../x<&>", "  spaced  "])
    #expect(request.objects.map(\.versionId) == [nil, "null", nil])
    #expect(try !DeleteObjectsRequest.parse(bytes("<Delete><Object><Key>k</Key></Object></Delete>")).quiet)
}

@Test func completeRequestReadsPartsInOrder() throws {
    let xml = #"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"abc"</ETag></Part><Part><ETag> "def" </ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32><PartNumber> 2 </PartNumber></Part></CompleteMultipartUpload>"#
    let request = try CompleteMultipartUploadRequest.parse(bytes(xml))
    #expect(request.parts == [
        .init(number: 1, etag: #""abc""#),
        .init(number: 2, etag: #""def""#, checksum: .init(algorithm: "CRC32", value: "AAAAAA==")),
    ])
}

@Test(arguments: [
    "<CompleteMultipartUpload/>",
    "<CompleteMultipartUpload><Part><PartNumber>x</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>",
    "<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>",
    "<CompleteMultipartUpload><Part><PartNumber>99999999999999999999</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>",
    "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>",
    "<Other><Part><PartNumber>1</PartNumber><ETag>e</ETag></Part></Other>",
    "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>e</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32><ChecksumSHA1>x</ChecksumSHA1></Part></CompleteMultipartUpload>",
])
func completeRequestRefusals(_ xml: String) {
    #expect(throws: XMLReadError.self) { try CompleteMultipartUploadRequest.parse(bytes(xml)) }
}

@Test(arguments: [
    "<Delete/>",
    "<Delete><Quiet>true</Quiet></Delete>",
    "<Delete><Object><VersionId>1</VersionId></Object></Delete>",
    "<Other><Object><Key>k</Key></Object></Other>",
])
func deleteRequestRefusals(_ xml: String) {
    #expect(throws: XMLReadError.self) { try DeleteObjectsRequest.parse(bytes(xml)) }
}

@Test func deleteRequestRefusesMoreThanAThousandKeys() throws {
    let objects = { (n: Int) in "<Delete>" + String(repeating: "<Object><Key>k</Key></Object>", count: n) + "</Delete>" }
    #expect(try DeleteObjectsRequest.parse(bytes(objects(1000))).objects.count == 1000)
    #expect(throws: XMLReadError.self) { try DeleteObjectsRequest.parse(bytes(objects(1001))) }
}

/// Every document here is refused: truncated, mismatched, DTDs and entities, stray content.
@Test(arguments: [
    "",
    "   ",
    "text",
    "<Delete><Object><Key>k</Key></Object>",              // missing closing tag: the defect once executed
    "<Delete><Object><Key>k</Key></Object></Delete",
    "<Delete><Object><Key>k</Key></Object></Delet>",
    "<Delete><Object><Key>k</Object></Key></Delete>",
    "</Delete>",
    "<Delete></Delete><Delete></Delete>",
    "<Delete></Delete>trailing",
    "<Delete><Key>a & b</Key></Delete>",
    "<Delete><Key>&bogus;</Key></Delete>",
    "<Delete><Key>&#0;</Key></Delete>",
    "<Delete><Key>&#xD800;</Key></Delete>",
    "<Delete><Key>&#x+41;</Key></Delete>",
    "<Delete><Key>&#-65;</Key></Delete>",
    "<Delete><Key>&amp</Key></Delete>",
    "<!DOCTYPE d [<!ENTITY a \"aaaa\">]><Delete><Key>&a;</Key></Delete>",
    "<Delete><!DOCTYPE x></Delete>",
    "<Delete a=\"1\" a=\"2\"></Delete>",
    "<Delete a=1></Delete>",
    "<Delete a></Delete>",
    "<Delete a=\"1\"b=\"2\"></Delete>",
    "<Delete a=\"<\"></Delete>",
    "<Delete a=\"1></Delete>",
    "<Delete><!-- unterminated </Delete>",
    "<Delete><![CDATA[ unterminated </Delete>",
    "<Delete><? unterminated </Delete>",
    "<Delete>\n<?xml version=\"1.0\"?></Delete>",
    "<?xml version=\"1.0\"?><?xml version=\"1.0\"?><Delete/>",
    "<![CDATA[x]]><Delete/>",
    "<1Delete/>",
    "<Delete",
    "< Delete/>",
])
func malformedDocumentsAreRefused(_ xml: String) {
    #expect(throws: XMLReadError.self) { try XMLReader.parse(bytes(xml), limits: loose) }
}

@Test func invalidUTF8IsRefused() {
    #expect(throws: XMLReadError.self) { try XMLReader.parse([0x3C, 0x61, 0x3E, 0xFF, 0x3C, 0x2F, 0x61, 0x3E], limits: loose) }
}

@Test func wellFormedCornerCases() throws {
    let document = try XMLReader.parse(bytes("\u{FEFF}<?xml version=\"1.0\"?>\n<a x='1' y = \"&amp;\"><b/><c>t<!-- c -->u<?pi x?></c>v</a>\n<!-- end -->\n"), limits: loose)
    #expect(document.elements.map(\.name) == ["a", "b", "c"])
    #expect(document.root.text == "v")
    #expect(document.child(of: document.root, named: "c")?.text == "tu")
}

/// The remote crash: 40 000 nested elements once overflowed the stack. Now refused at the
/// depth limit, in time linear in the input.
@Test func deepNestingIsRefusedAtTheLimit() {
    let depth = 40_000
    let open = String(repeating: "<a>", count: depth), close = String(repeating: "</a>", count: depth)
    #expect(throws: XMLReadError.self) { try XMLReader.parse(bytes("<Delete>" + open + close + "</Delete>"), limits: RequestBodies.limits) }
    #expect(throws: XMLReadError.self) { try XMLReader.parse(bytes(open), limits: RequestBodies.limits) }
    let limits = XMLLimits(maxBytes: 1 << 20, maxDepth: 3, maxElements: 100)
    #expect(throws: Never.self) { try XMLReader.parse(bytes("<a><b><c/></b></a>"), limits: limits) }
    #expect(throws: XMLReadError.self) { try XMLReader.parse(bytes("<a><b><c><d/></c></b></a>"), limits: limits) }
}

@Test func sizeAndElementCountAreBounded() {
    let limits = XMLLimits(maxBytes: 64, maxDepth: 8, maxElements: 3)
    #expect(throws: Never.self) { try XMLReader.parse(bytes("<a><b/><c/></a>"), limits: limits) }
    #expect(throws: XMLReadError.self) { try XMLReader.parse(bytes("<a><b/><c/><d/></a>"), limits: limits) }
    #expect(throws: XMLReadError.self) { try XMLReader.parse(bytes("<a>" + String(repeating: " ", count: 60) + "</a>"), limits: limits) }
}
