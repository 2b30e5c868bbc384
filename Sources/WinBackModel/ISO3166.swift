/// ISO 3166-1 alpha-2 ⇄ alpha-3, the same table as `Data/iso3166.csv` (a test keeps them equal).
///
/// Compiled in, so the binary needs no data folder at run time.
public enum ISO3166 {
    /// Each entry is alpha-2 followed by alpha-3, e.g. `USUSA`.
    static let packed = """
        ADAND AEARE AFAFG AGATG AIAIA ALALB AMARM AOAGO AQATA ARARG ASASM ATAUT \
        AUAUS AWABW AXALA AZAZE BABIH BBBRB BDBGD BEBEL BFBFA BGBGR BHBHR BIBDI \
        BJBEN BLBLM BMBMU BNBRN BOBOL BQBES BRBRA BSBHS BTBTN BVBVT BWBWA BYBLR \
        BZBLZ CACAN CCCCK CDCOD CFCAF CGCOG CHCHE CICIV CKCOK CLCHL CMCMR CNCHN \
        COCOL CRCRI CUCUB CVCPV CWCUW CXCXR CYCYP CZCZE DEDEU DJDJI DKDNK DMDMA \
        DODOM DZDZA ECECU EEEST EGEGY EHESH ERERI ESESP ETETH FIFIN FJFJI FKFLK \
        FMFSM FOFRO FRFRA GAGAB GBGBR GDGRD GEGEO GFGUF GGGGY GHGHA GIGIB GLGRL \
        GMGMB GNGIN GPGLP GQGNQ GRGRC GSSGS GTGTM GUGUM GWGNB GYGUY HKHKG HMHMD \
        HNHND HRHRV HTHTI HUHUN IDIDN IEIRL ILISR IMIMN ININD IOIOT IQIRQ IRIRN \
        ISISL ITITA JEJEY JMJAM JOJOR JPJPN KEKEN KGKGZ KHKHM KIKIR KMCOM KNKNA \
        KPPRK KRKOR KWKWT KYCYM KZKAZ LALAO LBLBN LCLCA LILIE LKLKA LRLBR LSLSO \
        LTLTU LULUX LVLVA LYLBY MAMAR MCMCO MDMDA MEMNE MFMAF MGMDG MHMHL MKMKD \
        MLMLI MMMMR MNMNG MOMAC MPMNP MQMTQ MRMRT MSMSR MTMLT MUMUS MVMDV MWMWI \
        MXMEX MYMYS MZMOZ NANAM NCNCL NENER NFNFK NGNGA NINIC NLNLD NONOR NPNPL \
        NRNRU NUNIU NZNZL OMOMN PAPAN PEPER PFPYF PGPNG PHPHL PKPAK PLPOL PMSPM \
        PNPCN PRPRI PSPSE PTPRT PWPLW PYPRY QAQAT REREU ROROU RSSRB RURUS RWRWA \
        SASAU SBSLB SCSYC SDSDN SESWE SGSGP SHSHN SISVN SJSJM SKSVK SLSLE SMSMR \
        SNSEN SOSOM SRSUR SSSSD STSTP SVSLV SXSXM SYSYR SZSWZ TCTCA TDTCD TFATF \
        TGTGO THTHA TJTJK TKTKL TLTLS TMTKM TNTUN TOTON TRTUR TTTTO TVTUV TWTWN \
        TZTZA UAUKR UGUGA UMUMI USUSA UYURY UZUZB VAVAT VCVCT VEVEN VGVGB VIVIR \
        VNVNM VUVUT WFWLF WSWSM YEYEM YTMYT ZAZAF ZMZMB ZWZWE
        """

    private static let table: (a2ToA3: [String: String], a3ToA2: [String: String]) = {
        var a2: [String: String] = [:]
        var a3: [String: String] = [:]
        for entry in packed.split(separator: " ") {
            let s = String(entry)
            let two = String(s.prefix(2))
            let three = String(s.suffix(3))
            a2[two] = three
            a3[three] = two
        }
        return (a2, a3)
    }()

    /// The alpha-3 code of an alpha-2 code.
    public static func alpha3(_ alpha2: String) -> String? { table.a2ToA3[alpha2] }

    /// The alpha-2 code of an alpha-3 code.
    public static func alpha2(_ alpha3: String) -> String? { table.a3ToA2[alpha3] }

    /// Every (alpha-2, alpha-3) pair, sorted by alpha-2.
    public static var pairs: [(String, String)] {
        table.a2ToA3.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}
